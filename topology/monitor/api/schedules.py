"""``/api/v1/schedules``: list, get, create, update, archive; pause, resume and trigger, for
the file's schedules and runtime ones alike.

Reads and changes go through the same code as ``warren schedules`` (the store's
``ScheduleAdmin``, ``topology/schedules/commands.py``). Reads answer from the store as the
monitor follows it live: a client polling them writes nothing to the log, and a change made
elsewhere shows within moments. Every write is audited to the history stream with the
token's name as ``by``.
"""

from __future__ import annotations

from typing import Any

from warren_cron.clock import utcnow
from warren_cron.errors import ScheduleNotFound
from warren_cron.history.events import event
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.monitor.api.models import (
    ArchiveQuery,
    CreateBody,
    Done,
    PauseBody,
    ResumeBody,
    Schedule,
    ScheduleList,
    TriggerBody,
    UpdateBody,
)
from warren_cron.monitor.api.problems import ApiError
from warren_cron.monitor.api.routes import Call, Endpoint
from warren_cron.monitor.dashboard.pages.schedules import followed
from warren_cron.ops.schedules import every_schedule, one_schedule
from warren_cron.schedules import commands
from warren_cron.schedules.schedule import Schedule as Resolved
from warren_cron.store.listing import runtime_row
from warren_cron.store.masking import shown_spec
from warren_cron.store.stored import StoredSchedule


async def list_schedules(call: Call) -> ScheduleList:
    """Every schedule: the file's, then the runtime ones (archived too)."""
    d = call.dashboard
    found = await every_schedule(
        d.schedules, d.api.admin, d.keeper.pauses, d.settings, utcnow(), sync=False
    )
    return ScheduleList.model_validate({"schedules": [item.row for item in found]})


async def get_schedule(call: Call) -> Schedule:
    """One schedule: its fields, status, version and history of changes."""
    d = call.dashboard
    try:
        found = await one_schedule(
            call.name, d.schedules, d.api.admin, d.keeper.pauses, d.settings, utcnow(), sync=False
        )
    except ScheduleNotFound:
        raise _unknown(call.name) from None
    history = [] if found.stored is None else found.stored.history
    spec = shown_spec(found.spec)
    return Schedule.model_validate({**found.row, "spec": spec, "history": history})


async def create_schedule(call: Call) -> Schedule:
    """Create a runtime schedule, or again one that was archived."""
    body = call.body_as(CreateBody)
    return _audited(call, await call.dashboard.api.admin.create(body.spec, call.by, body.reason))


async def update_schedule(call: Call) -> Schedule:
    """Change fields of a runtime schedule, from the version read."""
    body = call.body_as(UpdateBody)
    admin = call.dashboard.api.admin
    changed = await admin.update(call.name, body.changes, body.version, call.by, body.reason)
    return _audited(call, changed)


async def archive_schedule(call: Call) -> Schedule:
    """Archive a runtime schedule: it stops for good, its history stays."""
    query = call.query_as(ArchiveQuery)
    admin = call.dashboard.api.admin
    return _audited(call, await admin.archive(call.name, query.version, call.by, query.reason))


async def pause_schedule(call: Call) -> Done:
    """Pause a schedule: its fires are skipped until it is resumed."""
    dashboard, schedule = call.dashboard, await _live(call)
    reason = call.body_as(PauseBody).reason
    already = await commands.pause(
        dashboard.connection, dashboard.names, schedule.name, dashboard.history, call.by, reason
    )
    if already is not None:
        return Done(
            name=schedule.name,
            changed=False,
            message="paused already " + commands.describe(already),
        )
    await followed(dashboard, schedule.name, paused=True)
    return Done(name=schedule.name, changed=True, message="paused: fires are skipped")


async def resume_schedule(call: Call) -> Done:
    """Resume a schedule (the fires missed while paused under its catch_up policy if asked)."""
    dashboard, schedule = call.dashboard, await _live(call)
    body = call.body_as(ResumeBody)
    resumed = await commands.resume(
        dashboard.connection,
        dashboard.names,
        schedule.name,
        dashboard.history,
        call.by,
        catch_up=body.catch_up,
        reason=body.reason,
    )
    if not resumed:
        return Done(name=schedule.name, changed=False, message="not paused: nothing sent")
    await followed(dashboard, schedule.name, paused=False)
    missed = "published under its catch_up policy" if body.catch_up else "not run"
    return Done(name=schedule.name, changed=True, message=f"resumed: missed fires {missed}")


async def trigger_schedule(call: Call) -> Done:
    """Publish one run of a schedule now, paused or not."""
    dashboard, schedule = call.dashboard, await _live(call)
    reason = call.body_as(TriggerBody).reason
    run_id = await commands.trigger(
        dashboard.connection, dashboard.settings, schedule, dashboard.history, call.by, reason
    )
    return Done(name=schedule.name, changed=True, message="triggered", run_id=run_id)


async def _live(call: Call) -> Resolved:
    """The file's schedule of that name, else the live runtime one (404 when archived)."""
    return await call.dashboard.live_schedule(call.name)


def _unknown(name: str) -> ApiError:
    return ApiError(404, "not_found", f"no schedule {name!r}: GET /api/v1/schedules lists them")


def _audited(call: Call, stored: StoredSchedule) -> Schedule:
    audit(call.dashboard.history, stored, call.by)
    return _detail(call, stored)


def audit(history: HistoryPublisher, stored: StoredSchedule, by: str) -> None:
    """Record the schedule's last change in the history stream, as made by ``by``."""
    change = stored.history[-1]
    history.emit(
        event(
            "changed",
            schedule=stored.name,
            by=by,
            change=change["kind"],
            version=stored.version,
            reason=change.get("reason"),
        )
    )


def _detail(call: Call, stored: StoredSchedule) -> Schedule:
    found: dict[str, Any] = runtime_row(stored, call.dashboard.settings, utcnow())
    return Schedule.model_validate(
        {**found, "spec": shown_spec(stored.spec), "history": stored.history}
    )


NAMED = "/schedules/{name}"
ENDPOINTS = [
    Endpoint("GET", "/schedules", list_schedules, "read", ScheduleList),
    Endpoint(
        "POST",
        "/schedules",
        create_schedule,
        "create",
        Schedule,
        CreateBody,
        status=201,
        errors=(409,),
    ),
    Endpoint("GET", NAMED, get_schedule, "read", Schedule),
    Endpoint("PUT", NAMED, update_schedule, "update", Schedule, UpdateBody, errors=(409,)),
    Endpoint(
        "DELETE", NAMED, archive_schedule, "archive", Schedule, query=ArchiveQuery, errors=(409,)
    ),
    Endpoint("POST", NAMED + "/pause", pause_schedule, "pause", Done, PauseBody),
    Endpoint(
        "POST",
        NAMED + "/resume",
        resume_schedule,
        "resume",
        Done,
        ResumeBody,
        body_required=False,
    ),
    Endpoint(
        "POST",
        NAMED + "/trigger",
        trigger_schedule,
        "trigger",
        Done,
        TriggerBody,
        body_required=False,
    ),
]
