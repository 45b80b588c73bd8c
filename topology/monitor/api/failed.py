"""``/api/v1/failed``: the failed queue by filter, and replay or purge of a filter's records.

The filters are the dashboard's and ``warren failed``'s (``RecordFilter``); replay and purge
are the operations of ``warren_cron.ops.failed``, run beside the dashboard's copy of the failed
queue (waiting for its read, then having it read again), and write the history's ``replayed``
and ``purged`` events with the token's name as ``by``. With ``dry_run`` nothing moves: a replay
reads the queue as it would and counts, a purge counts the records it would take.
"""

from __future__ import annotations

from warren_cron.failed.select import RecordFilter
from warren_cron.failed.tally import Tally
from warren_cron.monitor.api.problems import ApiError
from warren_cron.monitor.api.routes import Call, Endpoint
from warren_cron.monitor.api.run_models import (
    FailedList,
    FailedQuery,
    FailedRecord,
    MoveBody,
    Moved,
    RecordQuery,
)
from warren_cron.ops.failed import (
    Beside,
    Purge,
    Replay,
    Verb,
    listed,
    own_plans,
    plan_picker,
    purge_records,
    replay_records,
    selection,
    summary,
)


def selected(query: RecordQuery) -> RecordFilter:
    """The records the query's filters pick (``run_id`` exact); 400 for a bad ``since``."""
    fields = query.model_dump(include=set(RecordQuery.model_fields), exclude_none=True)
    try:
        return selection(fields)
    except ValueError as error:
        raise ApiError(400, "invalid", str(error)) from None


async def list_failed(call: Call) -> FailedList:
    """The failed records the filters pick, oldest first (the dashboard's index of them)."""
    query, index = call.query_as(FailedQuery), call.dashboard.failed
    records = listed(index, selected(query))
    page = [FailedRecord.model_validate(record.summary()) for record in records[: query.limit]]
    read_at = None if index.read_at is None else index.read_at.isoformat()
    return FailedList(records=page, matched=len(records), read_at=read_at)


def _moving(body: MoveBody) -> RecordFilter:
    select = selected(body.filter)
    if select.selects_all and not body.all:
        why = "set a filter (schedule, reason, since, text, run_id), or all: true for every record"
        raise ApiError(400, "invalid", why)
    return select


def _moved(tally: Tally, dry_run: bool, verb: Verb) -> Moved:
    return Moved(
        dry_run=dry_run,
        matched=tally.matched,
        moved=tally.moved,
        failed=tally.failed,
        resent=tally.resent,
        message=summary(tally, verb, dry_run),
    )


async def replay_failed(call: Call) -> Moved:
    """Replay the records a filter picks, each on its schedule's retry plan."""
    body, dashboard = call.body_as(MoveBody), call.dashboard
    settings, file = dashboard.settings, {s.name: s.plan for s in dashboard.schedules}
    plans = await own_plans(file, dashboard.api.store, settings, sync=False)
    replay = Replay(
        select=_moving(body),
        plan_for=plan_picker(settings.default_plan(), plans),
        limit=body.limit,
        dry_run=body.dry_run,
        by=call.by,
        reason=body.reason,
    )
    beside = Beside(dashboard.failed, dashboard.connection)
    return _moved(await replay_records(settings, replay, beside), body.dry_run, "replay")


async def purge_failed(call: Call) -> Moved:
    """Purge the records a filter picks, for good."""
    body, dashboard = call.body_as(MoveBody), call.dashboard
    purge = Purge(_moving(body), body.limit, body.dry_run, call.by, body.reason)
    beside = Beside(dashboard.failed, dashboard.connection)
    tally = await purge_records(dashboard.connection, dashboard.settings, purge, beside)
    return _moved(tally, body.dry_run, "purge")


ENDPOINTS = [
    Endpoint("GET", "/failed", list_failed, "read", FailedList, query=FailedQuery),
    Endpoint("POST", "/failed/replay", replay_failed, "replay", Moved, MoveBody),
    Endpoint("POST", "/failed/purge", purge_failed, "purge", Moved, MoveBody),
]
