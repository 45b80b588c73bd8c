"""``/schedules``: the status table of ``warren status``, with trigger, pause and resume."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from aiohttp import web

from warren_cron.clock import utcnow
from warren_cron.monitor.dashboard import views
from warren_cron.monitor.dashboard.auth import Actor
from warren_cron.monitor.dashboard.pages.common import act, dashboard_of
from warren_cron.schedules import commands
from warren_cron.schedules.schedule import Schedule
from warren_cron.schedules.status import status_rows

if TYPE_CHECKING:
    from warren_cron.monitor.dashboard.service import Dashboard

#: How long an action waits for the monitor to follow its own pause or resume, so that the
#: page after it shows the change (the control stream is followed live, within a second).
FOLLOW_SECONDS = 3.0


async def schedules_page(request: web.Request) -> web.StreamResponse:
    """A page of schedules (filtered by name) with their status."""
    dashboard, now = dashboard_of(request), utcnow()
    needle = request.query.get("q", "").strip().lower()
    chosen = [s for s in dashboard.schedules if needle in s.name.lower()]
    page = views.page_of(chosen, request.query.get("page"))
    keeper = dashboard.keeper
    rows = status_rows(list(page.rows), keeper.fold, keeper.pauses, now)
    return dashboard.page(
        request, "schedules.html", rows=rows, page=page, q=needle, pauses=keeper.pauses
    )


def _schedule(dashboard: Dashboard, request: web.Request) -> Schedule:
    schedule = dashboard.by_name.get(request.match_info["name"])
    if schedule is None:
        raise web.HTTPNotFound(text="no such schedule in the monitor's CRON_SCHEDULES_FILE")
    return schedule


async def followed(dashboard: Dashboard, done: Callable[[], bool]) -> None:
    """Wait (a few seconds at most) until the monitor followed its own pause or resume."""
    changed = dashboard.keeper.control_changed
    deadline = time.monotonic() + FOLLOW_SECONDS
    while True:
        changed.clear()
        if done():
            return
        try:
            await asyncio.wait_for(changed.wait(), deadline - time.monotonic())
        except TimeoutError:
            return


async def trigger(request: web.Request) -> web.StreamResponse:
    """Publish one run of the schedule now."""
    dashboard = dashboard_of(request)
    schedule = _schedule(dashboard, request)

    async def perform(actor: Actor, form: Mapping[str, str], reason: str) -> str:
        run_id = await commands.trigger(
            dashboard.connection, dashboard.settings, schedule, dashboard.history, actor.by, reason
        )
        return f"triggered {schedule.name}: run {run_id}"

    return await act(request, "trigger", perform, "/schedules")


async def pause(request: web.Request) -> web.StreamResponse:
    """Pause the schedule, with the reason given."""
    dashboard = dashboard_of(request)
    schedule = _schedule(dashboard, request)

    async def perform(actor: Actor, form: Mapping[str, str], reason: str) -> str:
        already = await commands.pause(
            dashboard.connection,
            dashboard.names,
            schedule.name,
            dashboard.history,
            actor.by,
            reason,
        )
        if already is not None:
            return f"{schedule.name} was paused already: {commands.describe(already)}"
        await followed(dashboard, lambda: schedule.name in dashboard.keeper.pauses)
        return f"paused {schedule.name}: its fires are skipped until it is resumed"

    return await act(request, "pause", perform, "/schedules")


async def resume(request: web.Request) -> web.StreamResponse:
    """Resume the schedule (missed fires under its catch_up policy when asked)."""
    dashboard = dashboard_of(request)
    schedule = _schedule(dashboard, request)

    async def perform(actor: Actor, form: Mapping[str, str], reason: str) -> str:
        catch_up = form.get("catch_up") == "on"
        resumed = await commands.resume(
            dashboard.connection,
            dashboard.names,
            schedule.name,
            dashboard.history,
            actor.by,
            catch_up=catch_up,
            reason=reason,
        )
        if not resumed:
            return f"{schedule.name} was not paused: nothing sent"
        await followed(dashboard, lambda: schedule.name not in dashboard.keeper.pauses)
        missed = "published under its catch_up policy" if catch_up else "not run"
        return f"resumed {schedule.name}: fires missed while paused are {missed}"

    return await act(request, "resume", perform, "/schedules")


def add_routes(app: web.Application) -> None:
    """``/schedules`` and its actions."""
    app.router.add_get("/schedules", schedules_page)
    app.router.add_post("/schedules/{name}/trigger", trigger)
    app.router.add_post("/schedules/{name}/pause", pause)
    app.router.add_post("/schedules/{name}/resume", resume)
