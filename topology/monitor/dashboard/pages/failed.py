"""``/failed``: the failed queue paged and filtered like ``warren failed list``, a record in full,
and replay or purge of one record or of a filter's matches (a count first, then a confirm)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from aiohttp import web

from warren_cron.failed.select import RecordFilter
from warren_cron.monitor.console import views
from warren_cron.monitor.dashboard.pages.common import act
from warren_cron.monitor.roles import Action
from warren_cron.monitor.web.auth import Actor
from warren_cron.monitor.web.dashboard import dashboard_of
from warren_cron.ops.failed import (
    FIELDS,
    Beside,
    Purge,
    Replay,
    listed,
    own_plans,
    plan_picker,
    purge_records,
    replay_records,
    selection,
    shown,
    summary,
)

if TYPE_CHECKING:
    from warren_cron.monitor.web.dashboard import WebDashboard

ACTIONS = ("replay", "purge")


def _filters(values: Mapping[str, str]) -> dict[str, str]:
    return {key: values[key].strip() for key in FIELDS if values.get(key, "").strip()}


async def failed_page(request: web.Request) -> web.StreamResponse:
    """A page of the records the filters pick."""
    dashboard, filters = dashboard_of(request), _filters(request.query)
    try:
        records, error = listed(dashboard.failed, selection(filters)), None
    except ValueError as bad:
        records, error = [], str(bad)
    return dashboard.page(
        request,
        "failed.html",
        page=views.page_of(records, request.query.get("page")),
        filters=filters,
        query=urlencode(filters),
        error=error,
        reasons=dashboard.failed.reasons(),
        index=dashboard.failed,
    )


async def record_page(request: web.Request) -> web.StreamResponse:
    """Every record of one run id, in full, its secrets hidden."""
    dashboard = dashboard_of(request)
    run_id = request.query.get("run_id", "")
    # In full from the queue: the index keeps no bodies, headers or histories.
    copy = dashboard.failed
    records = await shown(dashboard.connection, dashboard.names, run_id, copy) if run_id else []
    return dashboard.page(
        request,
        "record.html",
        status=200 if records else 404,
        run_id=run_id,
        records=records,
        body=views.shown_body,
        headers=views.shown_headers,
        pretty=views.pretty,
        query=urlencode({"run_id": run_id}),
    )


async def confirm_page(request: web.Request) -> web.StreamResponse:
    """How many records an action would take (a dry run on the index), and its form."""
    dashboard, filters = dashboard_of(request), _filters(request.query)
    action = request.query.get("action", "")
    if action not in ACTIONS:
        raise web.HTTPBadRequest(text="action must be replay or purge")
    try:
        count = len(listed(dashboard.failed, selection(filters)))
    except ValueError as bad:
        raise web.HTTPBadRequest(text=str(bad)) from None
    return dashboard.page(
        request,
        "confirm.html",
        action=action,
        filters=filters,
        count=count,
        read_at=dashboard.failed.read_at,
        back="/failed?" + urlencode({k: v for k, v in filters.items() if k != "run_id"}),
    )


def _agreed(form: Mapping[str, str]) -> int:
    # Never more records than the count the user confirmed.
    try:
        return max(0, int(form.get("count", "0")))
    except ValueError:
        return 0


async def _replay(
    dashboard: WebDashboard, select: RecordFilter, count: int, actor: Actor, reason: str
) -> str:
    settings, file = dashboard.settings, {s.name: s.plan for s in dashboard.schedules}
    plans = await own_plans(file, dashboard.api.store, settings, sync=False)
    plan_for = plan_picker(settings.default_plan(), plans)
    replay = Replay(select, plan_for, limit=count, by=actor.by, reason=reason)
    beside = Beside(dashboard.failed, dashboard.connection)
    return summary(await replay_records(settings, replay, beside), "replay", agreed=count)


async def _purge(
    dashboard: WebDashboard, select: RecordFilter, count: int, actor: Actor, reason: str
) -> str:
    purge = Purge(select, limit=count, by=actor.by, reason=reason)
    beside = Beside(dashboard.failed, dashboard.connection)
    tally = await purge_records(dashboard.connection, dashboard.settings, purge, beside)
    return summary(tally, "purge", agreed=count)


async def moved(request: web.Request) -> web.StreamResponse:
    """Replay or purge the records the form's filters pick, at most the count confirmed."""
    dashboard = dashboard_of(request)
    action: Action = "replay" if request.match_info["action"] == "replay" else "purge"

    async def perform(actor: Actor, form: Mapping[str, str], reason: str) -> str:
        count = _agreed(form)
        if count == 0:
            return "nothing matched: nothing done"
        try:
            select = selection(form)
        except ValueError as bad:
            return str(bad)
        move = _replay if action == "replay" else _purge
        return await move(dashboard, select, count, actor, reason)

    return await act(request, action, perform, "/failed")


def add_routes(app: web.Application) -> None:
    """``/failed``, a record, the confirmation, and the two actions."""
    app.router.add_get("/failed", failed_page)
    app.router.add_get("/failed/record", record_page)
    app.router.add_get("/failed/confirm", confirm_page)
    app.router.add_post(r"/failed/{action:replay|purge}", moved)
