"""``/schedules``: the status table of ``warren status``, with trigger, pause and resume;
``/schedules/<name>``: one schedule, file or runtime, as every surface shows it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from warren_cron.clock import utcnow
from warren_cron.errors import ScheduleNotFound
from warren_cron.monitor.console import views
from warren_cron.monitor.dashboard.pages.common import act
from warren_cron.monitor.web.auth import Actor
from warren_cron.monitor.web.dashboard import dashboard_of
from warren_cron.ops.schedule_actions import (
    live_schedule,
    pause_schedule,
    resume_schedule,
    trigger_schedule,
    views_of,
)
from warren_cron.ops.schedules import every_schedule, one_schedule
from warren_cron.ops.schedules import status_rows as listed_status
from warren_cron.schedules.commands import describe
from warren_cron.schedules.schedule import Schedule
from warren_cron.schedules.status_rows import status_rows
from warren_cron.store.masking import shown_spec

if TYPE_CHECKING:
    from warren_cron.monitor.web.dashboard import WebDashboard


async def schedules_page(request: web.Request) -> web.StreamResponse:
    """A page of schedules (filtered by name) with their status."""
    dashboard, now = dashboard_of(request), utcnow()
    needle = request.query.get("q", "").strip().lower()
    chosen = [s for s in dashboard.schedules if needle in s.name.lower()]
    page = views.page_of(chosen, request.query.get("page"))
    keeper = dashboard.keeper
    rows = status_rows(list(page.rows), keeper.fold, keeper.pauses, now)
    runtime = await runtime_rows(dashboard, needle)
    return dashboard.page(
        request,
        "schedules.html",
        rows=rows,
        page=page,
        q=needle,
        pauses=keeper.pauses,
        runtime=runtime,
        has_store=dashboard.api.has_store,
    )


async def runtime_rows(dashboard: WebDashboard, needle: str) -> list[dict[str, Any]]:
    """The runtime schedules whose name holds ``needle``, as ``list`` shows them (none
    when the monitor does not follow the store)."""
    if dashboard.api.store is None:
        return []
    found = await every_schedule(
        [], dashboard.api.store, {}, dashboard.settings, utcnow(), sync=False
    )
    return [item.row for item in found if needle in item.name.lower()]


async def schedule_page(request: web.Request) -> web.StreamResponse:
    """One schedule, file or runtime: its source, status, last runs, next fire and fields."""
    dashboard, name, now = dashboard_of(request), request.match_info["name"], utcnow()
    keeper = dashboard.keeper
    try:
        found = await one_schedule(
            name,
            dashboard.schedules,
            dashboard.api.store,
            keeper.pauses,
            dashboard.settings,
            now,
            sync=False,
        )
    except ScheduleNotFound:
        raise web.HTTPNotFound(text=f"no schedule {name!r}: /schedules lists them") from None
    return dashboard.page(
        request,
        "schedule.html",
        found=found,
        row=next(iter(listed_status([found], keeper.fold, now)), None),
        fields=orjson.dumps(shown_spec(found.spec), option=orjson.OPT_INDENT_2).decode(),
    )


async def _schedule(dashboard: WebDashboard, name: str) -> Schedule:
    """The file's schedule ``name``, else the live runtime one; 404 for neither. Called once
    the action's sender is authorized: a runtime one is read from the store."""
    try:
        return await live_schedule(name, dashboard.by_name, dashboard.api.store, dashboard.settings)
    except ScheduleNotFound:
        raise web.HTTPNotFound(
            text=f"no schedule {name!r}: neither in CRON_SCHEDULES_FILE nor a live runtime schedule"
        ) from None


async def trigger(request: web.Request) -> web.StreamResponse:
    """Publish one run of the schedule now."""
    dashboard, name = dashboard_of(request), request.match_info["name"]

    async def perform(actor: Actor, form: Mapping[str, str], reason: str) -> str:
        schedule = await _schedule(dashboard, name)
        run = await trigger_schedule(
            dashboard.connection, dashboard.settings, schedule, dashboard.history, actor.by, reason
        )
        return f"triggered {schedule.name}: run {run.run_id}"

    return await act(request, "trigger", perform, "/schedules")


async def pause(request: web.Request) -> web.StreamResponse:
    """Pause the schedule, with the reason given."""
    dashboard, name = dashboard_of(request), request.match_info["name"]

    async def perform(actor: Actor, form: Mapping[str, str], reason: str) -> str:
        schedule = await _schedule(dashboard, name)
        paused = await pause_schedule(
            dashboard.connection,
            dashboard.names,
            schedule.name,
            dashboard.history,
            actor.by,
            reason,
            views=views_of(dashboard.keeper, dashboard.api.store),
        )
        if paused.already is not None:
            return f"{schedule.name} was paused already: {describe(paused.already)}"
        return f"paused {schedule.name}: its fires are skipped until it is resumed"

    return await act(request, "pause", perform, "/schedules")


async def resume(request: web.Request) -> web.StreamResponse:
    """Resume the schedule (missed fires under its catch_up policy when asked)."""
    dashboard, name = dashboard_of(request), request.match_info["name"]

    async def perform(actor: Actor, form: Mapping[str, str], reason: str) -> str:
        schedule = await _schedule(dashboard, name)
        catch_up = form.get("catch_up") == "on"
        resumed = await resume_schedule(
            dashboard.connection,
            dashboard.names,
            schedule.name,
            dashboard.history,
            actor.by,
            catch_up=catch_up,
            reason=reason,
            views=views_of(dashboard.keeper, dashboard.api.store),
        )
        if not resumed.changed:
            return f"{schedule.name} was not paused: nothing sent"
        missed = "published under its catch_up policy" if catch_up else "not run"
        return f"resumed {schedule.name}: fires missed while paused are {missed}"

    return await act(request, "resume", perform, "/schedules")


def add_routes(app: web.Application) -> None:
    """``/schedules`` and its actions."""
    app.router.add_get("/schedules", schedules_page)
    app.router.add_post("/schedules/{name}/trigger", trigger)
    app.router.add_post("/schedules/{name}/pause", pause)
    app.router.add_post("/schedules/{name}/resume", resume)


def add_page_route(app: web.Application) -> None:
    """``/schedules/<name>``: added after ``/schedules/new``, which it would take."""
    app.router.add_get("/schedules/{name}", schedule_page)
