"""``/api/v1/schedules``: list, get, create, update, archive; pause, resume and trigger, for
the file's schedules and runtime ones alike.

Reads and changes are the operations ``warren schedules`` and the dashboard call
(``warren_cron.ops.schedules``, ``schedule_writes``, ``schedule_actions``). Reads answer
from the store as the monitor follows it live: a client polling them writes nothing to the
log, and a change made elsewhere shows within moments. Every write is audited to the
history stream with the token's name as ``by``.
"""

from __future__ import annotations

from typing import Any

from warren_cron.clock import utcnow
from warren_cron.errors import ScheduleNotFound
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
from warren_cron.ops import schedule_actions as actions
from warren_cron.ops import schedule_writes as writes
from warren_cron.ops.schedules import every_schedule, one_schedule
from warren_cron.schedules.commands import describe
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
    admin, history = call.dashboard.api.admin, call.dashboard.history
    created = await writes.create_schedule(admin, body.spec, call.by, body.reason, audit_to=history)
    return _detail(call, created)


async def update_schedule(call: Call) -> Schedule:
    """Change fields of a runtime schedule, from the version read."""
    body = call.body_as(UpdateBody)
    admin, history = call.dashboard.api.admin, call.dashboard.history
    changed = await writes.update_schedule(
        admin, call.name, body.changes, body.version, call.by, body.reason, audit_to=history
    )
    return _detail(call, changed)


async def archive_schedule(call: Call) -> Schedule:
    """Archive a runtime schedule: it stops for good, its history stays."""
    query = call.query_as(ArchiveQuery)
    admin, history = call.dashboard.api.admin, call.dashboard.history
    archived = await writes.archive_schedule(
        admin, call.name, query.version, call.by, query.reason, audit_to=history
    )
    return _detail(call, archived)


async def pause_schedule(call: Call) -> Done:
    """Pause a schedule: its fires are skipped until it is resumed."""
    d, schedule = call.dashboard, await _live(call)
    reason = call.body_as(PauseBody).reason
    views = actions.views_of(d.keeper, d.api.store)
    paused = await actions.pause_schedule(
        d.connection, d.names, schedule.name, d.history, call.by, reason, views=views
    )
    if paused.already is not None:
        message = "paused already " + describe(paused.already)
        return Done(name=schedule.name, changed=False, message=message)
    return Done(name=schedule.name, changed=True, message="paused: fires are skipped")


async def resume_schedule(call: Call) -> Done:
    """Resume a schedule (the fires missed while paused under its catch_up policy if asked)."""
    d, schedule = call.dashboard, await _live(call)
    body = call.body_as(ResumeBody)
    resumed = await actions.resume_schedule(
        d.connection,
        d.names,
        schedule.name,
        d.history,
        call.by,
        catch_up=body.catch_up,
        reason=body.reason,
        views=actions.views_of(d.keeper, d.api.store),
    )
    if not resumed.changed:
        return Done(name=schedule.name, changed=False, message="not paused: nothing sent")
    missed = "published under its catch_up policy" if body.catch_up else "not run"
    return Done(name=schedule.name, changed=True, message=f"resumed: missed fires {missed}")


async def trigger_schedule(call: Call) -> Done:
    """Publish one run of a schedule now, paused or not."""
    d, schedule = call.dashboard, await _live(call)
    reason = call.body_as(TriggerBody).reason
    run = await actions.trigger_schedule(
        d.connection, d.settings, schedule, d.history, call.by, reason
    )
    return Done(name=schedule.name, changed=True, message="triggered", run_id=run.run_id)


async def _live(call: Call) -> Resolved:
    """The file's schedule of that name, else the live runtime one (404 when archived)."""
    d = call.dashboard
    return await actions.live_schedule(call.name, d.by_name, d.api.store, d.settings)


def _unknown(name: str) -> ApiError:
    return ApiError(404, "not_found", f"no schedule {name!r}: GET /api/v1/schedules lists them")


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
