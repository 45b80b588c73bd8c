"""``/failed``: the failed queue paged and filtered like ``warren failed list``, a record in full,
and replay or purge of one record or of a filter's matches (a count first, then a confirm)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from aiohttp import web

from warren_cron.failed.replay import Replayer, ReplayOptions
from warren_cron.failed.select import RecordFilter, exact, parse_since
from warren_cron.failed.store import purge_recorded
from warren_cron.failed.tally import Tally
from warren_cron.monitor.dashboard import views
from warren_cron.monitor.dashboard.auth import Actor
from warren_cron.monitor.dashboard.pages.common import act, dashboard_of
from warren_cron.monitor.roles import Action
from warren_cron.plan import task_plan

if TYPE_CHECKING:
    from warren_cron.monitor.dashboard.service import Dashboard

#: The filter fields of the list, the confirmation and the actions.
FIELDS = ("schedule", "reason", "since", "text", "run_id")
ACTIONS = ("replay", "purge")


def selection(values: Mapping[str, str]) -> RecordFilter:
    """The records ``values`` pick (``run_id`` exact); ``ValueError`` for a bad ``since``."""
    given = {key: values.get(key, "").strip() for key in FIELDS}
    return RecordFilter(
        schedule=given["schedule"] or None,
        reason=given["reason"] or None,
        since=parse_since(given["since"]) if given["since"] else None,
        text=given["text"] or None,
        run_id=exact(given["run_id"]) if given["run_id"] else None,
    )


def _filters(values: Mapping[str, str]) -> dict[str, str]:
    return {key: values[key].strip() for key in FIELDS if values.get(key, "").strip()}


async def failed_page(request: web.Request) -> web.StreamResponse:
    """A page of the records the filters pick."""
    dashboard, filters = dashboard_of(request), _filters(request.query)
    try:
        records = dashboard.failed.select(selection(filters))
        error = None
    except ValueError as bad:
        records, error = [], str(bad).replace("--since", "since")
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
    records = await dashboard.failed.whole(dashboard.connection, run_id) if run_id else []
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
        count = len(dashboard.failed.select(selection(filters)))
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


async def replay_matching(
    dashboard: Dashboard,
    select: RecordFilter,
    limit: int | None,
    by: str,
    reason: str | None,
    dry_run: bool = False,
) -> Tally:
    """Replay up to ``limit`` records ``select`` picks, each on its schedule's plan, as
    ``warren failed replay`` does; ``by`` and ``reason`` go to the history."""
    settings, plans = dashboard.settings, {s.name: s.plan for s in dashboard.schedules}
    default = settings.default_plan()
    options = ReplayOptions(
        select=select,
        plan_for=lambda r: task_plan(r.schedule, default=default, schedule_plans=plans),
        limit=limit,
        dry_run=dry_run,
        by=by,
        reason=reason,
    )
    async with dashboard.failed.lock:
        return await Replayer(settings, options).run()


async def purge_matching(
    dashboard: Dashboard, select: RecordFilter, limit: int | None, by: str, reason: str | None
) -> Tally:
    """Purge up to ``limit`` records ``select`` picks, as ``warren failed purge`` does."""
    async with dashboard.failed.lock:
        return await purge_recorded(
            dashboard.connection, dashboard.settings, select, limit, by=by, reason=reason
        )


async def _replay(
    dashboard: Dashboard, select: RecordFilter, count: int, actor: Actor, reason: str
) -> str:
    tally = await replay_matching(dashboard, select, count, actor.by, reason)
    kept = f"; {tally.failed} could not be moved and stay" if tally.failed else ""
    return f"replayed {tally.moved} of {count} record(s){kept}"


async def _purge(
    dashboard: Dashboard, select: RecordFilter, count: int, actor: Actor, reason: str
) -> str:
    tally = await purge_matching(dashboard, select, count, actor.by, reason)
    return f"purged {tally.moved} of {count} record(s)"


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
        message = await move(dashboard, select, count, actor, reason)
        await dashboard.failed.refresh(dashboard.connection)
        return message

    return await act(request, action, perform, "/failed")


def add_routes(app: web.Application) -> None:
    """``/failed``, a record, the confirmation, and the two actions."""
    app.router.add_get("/failed", failed_page)
    app.router.add_get("/failed/record", record_page)
    app.router.add_get("/failed/confirm", confirm_page)
    app.router.add_post(r"/failed/{action:replay|purge}", moved)
