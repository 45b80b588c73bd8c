"""``/api/v1/failed``: the failed queue by filter, and replay or purge of a filter's records.

The filters are the dashboard's and ``warren failed``'s (``RecordFilter``); replay and purge
run the same code (``topology/failed/``) under the dashboard's lock of the failed queue, and
write the history's ``replayed`` and ``purged`` events with the token's name as ``by``. With
``dry_run`` nothing moves: a replay reads the queue as it would and counts, a purge counts
the records it would take.
"""

from __future__ import annotations

from warren_cron.failed.select import RecordFilter
from warren_cron.failed.store import read_records
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
from warren_cron.monitor.dashboard.pages.failed import purge_matching, replay_matching, selection


def selected(query: RecordQuery) -> RecordFilter:
    """The records the query's filters pick (``run_id`` exact); 400 for a bad ``since``."""
    fields = query.model_dump(include=set(RecordQuery.model_fields), exclude_none=True)
    try:
        return selection(fields)
    except (ValueError, OverflowError) as error:
        why = str(error).replace("--since", "since") if isinstance(error, ValueError) else ""
        raise ApiError(400, "invalid", why or f"since {query.since!r} is too far back") from None


async def list_failed(call: Call) -> FailedList:
    """The failed records the filters pick, oldest first (the dashboard's index of them)."""
    query, index = call.query_as(FailedQuery), call.dashboard.failed
    records = index.select(selected(query))
    page = [FailedRecord.model_validate(record.summary()) for record in records[: query.limit]]
    read_at = None if index.read_at is None else index.read_at.isoformat()
    return FailedList(records=page, matched=len(records), read_at=read_at)


def _moving(body: MoveBody) -> RecordFilter:
    select = selected(body.filter)
    if select.selects_all and not body.all:
        why = "set a filter (schedule, reason, since, text, run_id), or all: true for every record"
        raise ApiError(400, "invalid", why)
    return select


_PAST = {"replay": "replayed", "purge": "purged"}


def _moved(tally: Tally, dry_run: bool, verb: str) -> Moved:
    if dry_run:
        message = f"would {verb} {tally.moved} record(s) (dry run: nothing moved)"
    else:
        kept = f"; {tally.failed} could not be moved and stay" if tally.failed else ""
        message = f"{_PAST[verb]} {tally.moved} of {tally.matched} matching record(s){kept}"
    return Moved(
        dry_run=dry_run,
        matched=tally.matched,
        moved=tally.moved,
        failed=tally.failed,
        message=message,
    )


async def replay_failed(call: Call) -> Moved:
    """Replay the records a filter picks, each on its schedule's retry plan."""
    body, dashboard = call.body_as(MoveBody), call.dashboard
    select = _moving(body)
    tally = await replay_matching(dashboard, select, body.limit, call.by, body.reason, body.dry_run)
    if not body.dry_run:
        await dashboard.failed.refresh(dashboard.connection)
    return _moved(tally, body.dry_run, "replay")


async def purge_failed(call: Call) -> Moved:
    """Purge the records a filter picks, for good."""
    body, dashboard = call.body_as(MoveBody), call.dashboard
    select = _moving(body)
    if body.dry_run:
        found = await read_records(dashboard.connection, dashboard.names, select, body.limit)
        return _moved(Tally(matched=len(found), moved=len(found)), True, "purge")
    tally = await purge_matching(dashboard, select, body.limit, call.by, body.reason)
    await dashboard.failed.refresh(dashboard.connection)
    return _moved(tally, False, "purge")


ENDPOINTS = [
    Endpoint("GET", "/failed", list_failed, "read", FailedList, query=FailedQuery),
    Endpoint("POST", "/failed/replay", replay_failed, "replay", Moved, MoveBody),
    Endpoint("POST", "/failed/purge", purge_failed, "purge", Moved, MoveBody),
]
