"""``/``: queue depths, attempts per minute, the day's failures, silent schedules, workers."""

from __future__ import annotations

from datetime import datetime

from aiohttp import web

from warren_cron.broker.depths import queue_rows
from warren_cron.clock import utcnow
from warren_cron.monitor.console import views
from warren_cron.monitor.scheduler_down import SchedulerWatch
from warren_cron.monitor.web.dashboard import dashboard_of
from warren_cron.ops.schedules import counts, every_schedule
from warren_cron.ops.waiting import waiting_in
from warren_cron.plan import format_delay
from warren_cron.schedules.heartbeats import SchedulerView


async def overview(request: web.Request) -> web.StreamResponse:
    """The page an operator keeps open."""
    dashboard, now = dashboard_of(request), utcnow()
    settings, keeper = dashboard.settings, dashboard.keeper
    queues = await queue_rows(
        dashboard.connection, dashboard.names, settings.queue_type, dashboard.plan_keys()
    )
    silent = [
        (name, dashboard.by_name[name].spec.expect_success_within, state.last_success_at)
        for name, state in keeper.fold.schedules.items()
        if state.silent and name in dashboard.by_name
    ]
    listed = await every_schedule(
        dashboard.schedules, dashboard.api.store, keeper.pauses, settings, now, sync=False
    )
    schedules, paused = counts(listed)
    activity = dashboard.activity
    minutes = activity.per_minute(now, views.CHART_MINUTES)
    return dashboard.page(
        request,
        "overview.html",
        scheduler=scheduler_state(dashboard.schedulers, now),
        queues=queues,
        namespace=settings.namespace,
        ttl=lambda ms: "-" if ms is None else format_delay(ms),
        short=lambda queue: queue.removeprefix(f"{settings.namespace}_"),
        bars=views.chart(minutes),
        totals=views.totals(minutes),
        chart_height=views.CHART_HEIGHT,
        failures=activity.failures_by_reason(now),
        silent=silent,
        workers=activity.workers_seen(now),
        long_runs=dashboard.long_runs.now(now),
        schedules=schedules,
        paused=paused,
        waiting=waiting_in(queues),
        failed_records=len(dashboard.failed.records),
        failed_read_at=dashboard.failed.read_at,
    )


def scheduler_state(watch: SchedulerWatch | None, now: datetime) -> tuple[str, bool] | None:
    """The liveness line of the watch's latest look, as of now, and whether it is bad."""
    if watch is None or watch.view is None:
        return None
    view = SchedulerView(watch.view.held, watch.beats, now)
    return view.line(), watch.firing or not view.leading


def add_routes(app: web.Application) -> None:
    """``/``."""
    app.router.add_get("/", overview)
