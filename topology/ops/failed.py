"""Failed records: pick, list, show, export, replay and purge them, and say what a replay or a
purge did, once for ``warren failed``, the HTTP API and the dashboard.

The failed queue is the store of record; ``topology/failed/`` holds the low-level pieces that
read, move and remove its records. The monitor keeps a copy of the records' summaries (its
``FailedIndex``, seen here as a ``FailedCopy``): an action run beside it (``Beside``) waits for
the copy's read of the queue, holds it off while records move, and has it read the queue again
after, so the list never shows what is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from aio_pika.abc import AbstractConnection

from warren_cron.failed.replay import Replayer, ReplayOptions
from warren_cron.failed.select import RecordFilter, exact, parse_since
from warren_cron.failed.store import Exporter, each_record, purge_recorded, read_records
from warren_cron.failed.tally import Progress, Tally
from warren_cron.names import Names
from warren_cron.plan import RetryPlan, task_plan
from warren_cron.records import FailedRecord
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.schedule import build_schedule
from warren_cron.store.admin import ScheduleAdmin

#: The filter fields of a selection made from text (a page's form or query, the API's body).
FIELDS = ("schedule", "reason", "since", "text", "run_id")
Verb = Literal["replay", "purge"]
#: The plan a record is replayed on.
PlanFor = Callable[[FailedRecord], RetryPlan]
_PAST: dict[Verb, str] = {"replay": "replayed", "purge": "purged"}


class FailedCopy(Protocol):
    """The monitor's copy of the failed queue: its summaries, its lock and its re-read."""

    @property
    def lock(self) -> asyncio.Lock:
        """Held by a read of the queue, and by the actions that must not race one."""
        ...

    @property
    def read_at(self) -> datetime | None:
        """When the copy last read the whole queue."""
        ...

    def select(self, select: RecordFilter) -> list[FailedRecord]:
        """The summaries ``select`` matches, in queue order."""
        ...

    async def whole(self, connection: AbstractConnection, run_id: str) -> list[FailedRecord]:
        """The records of ``run_id`` in full, read from the queue."""
        ...

    async def refresh(self, connection: AbstractConnection) -> None:
        """Read the whole queue again."""
        ...


@dataclass(frozen=True, slots=True)
class Beside:
    """The monitor's copy and its connection, for an action run inside the monitor."""

    copy: FailedCopy
    connection: AbstractConnection


def selection(values: Mapping[str, str]) -> RecordFilter:
    """The records ``values`` pick (``run_id`` exact); ``ValueError`` for a bad ``since``."""
    given = {key: values.get(key, "").strip() for key in FIELDS}
    return RecordFilter(
        schedule=given["schedule"] or None,
        reason=given["reason"] or None,
        since=_since(given["since"]) if given["since"] else None,
        text=given["text"] or None,
        run_id=exact(given["run_id"]) if given["run_id"] else None,
    )


def _since(value: str) -> datetime:
    try:
        return parse_since(value)
    except OverflowError:  # an age older than the calendar: a mistake to name, not a crash
        raise ValueError(f"since {value!r} is too far back") from None
    except ValueError as bad:
        raise ValueError(str(bad).replace("--since", "since")) from None


def listed(copy: FailedCopy, select: RecordFilter) -> list[FailedRecord]:
    """The records ``select`` picks from the monitor's copy, oldest first (no queue read)."""
    return copy.select(select)


def each_listed(
    connection: AbstractConnection, names: Names, select: RecordFilter, limit: int | None = None
) -> AsyncGenerator[FailedRecord]:
    """The records ``select`` picks, read from the queue one at a time; the queue keeps them."""
    return each_record(connection, names, select, limit)


async def shown(
    connection: AbstractConnection, names: Names, run_id: str, copy: FailedCopy | None = None
) -> list[FailedRecord]:
    """Every record of exactly ``run_id`` in full (no pattern: ``*`` is a character here);
    beside the monitor, read only as far as its copy knows of them."""
    if copy is not None:
        return await copy.whole(connection, run_id)
    return await read_records(connection, names, RecordFilter(run_id=exact(run_id)))


async def exported_records(
    connection: AbstractConnection,
    names: Names,
    select: RecordFilter,
    limit: int | None = None,
    progress: Progress | None = None,
) -> list[FailedRecord]:
    """The records ``select`` picks, in full, to be exported; the queue keeps every one."""
    return await read_records(connection, names, select, limit, progress)


async def own_plans(
    file: Mapping[str, RetryPlan] | None,
    store: ScheduleAdmin | None,
    settings: CronSettings,
    *,
    sync: bool,
) -> dict[str, RetryPlan]:
    """Each schedule's own retry plan: the runtime ones' (archived too: their records are
    still theirs), and the file's over them; the store as followed so far for ``sync=False``."""
    stored = [] if store is None else await store.list(sync=sync)
    plans = {item.name: build_schedule(item.spec, settings).plan for item in stored}
    plans.update(file or {})
    return plans


def plan_picker(
    default: RetryPlan,
    schedule_plans: Mapping[str, RetryPlan] | None,
    override: RetryPlan | None = None,
) -> PlanFor:
    """Each record's replay plan: ``override``, else its schedule's own, else ``default``."""
    return lambda record: task_plan(
        record.schedule, default=default, override=override, schedule_plans=schedule_plans
    )


@dataclass
class Replay:
    """What a replay takes, and how: who and why go to the history."""

    select: RecordFilter
    plan_for: PlanFor
    limit: int | None = None
    dry_run: bool = False
    by: str | None = None
    reason: str | None = None
    rate: float | None = None
    reconnect_seconds: float = 60.0
    progress: Progress | None = field(default=None, repr=False)


async def replay_records(
    settings: CronSettings, replay: Replay, beside: Beside | None = None
) -> Tally:
    """Move the records ``replay`` picks back to the tasks exchange, each on its plan."""
    options = ReplayOptions(
        select=replay.select,
        plan_for=replay.plan_for,
        limit=replay.limit,
        rate=replay.rate,
        dry_run=replay.dry_run,
        reconnect_seconds=replay.reconnect_seconds,
        progress=replay.progress,
        by=replay.by,
        reason=replay.reason,
    )
    async with _held(beside):
        tally = await Replayer(settings, options).run()
    if not replay.dry_run:
        await _reread(beside)
    return tally


@dataclass
class Purge:
    """What a purge takes: who and why go to the history; ``export`` saves them first."""

    select: RecordFilter
    limit: int | None = None
    dry_run: bool = False
    by: str | None = None
    reason: str | None = None
    progress: Progress | None = field(default=None, repr=False)
    export: Exporter | None = field(default=None, repr=False)


async def purge_records(
    connection: AbstractConnection,
    settings: CronSettings,
    purge: Purge,
    beside: Beside | None = None,
) -> Tally:
    """Remove the records ``purge`` picks for good; a dry run counts them and removes none."""
    if purge.dry_run:
        names = Names(settings.namespace)
        found = await read_records(connection, names, purge.select, purge.limit)
        return Tally(matched=len(found), moved=len(found))
    async with _held(beside):
        tally = await purge_recorded(
            connection,
            settings,
            purge.select,
            purge.limit,
            by=purge.by,
            reason=purge.reason,
            progress=purge.progress,
            export=purge.export,
        )
    await _reread(beside)
    return tally


def summary(tally: Tally, verb: Verb, dry_run: bool = False, agreed: int | None = None) -> str:
    """One line saying what a replay or a purge did; ``agreed`` is the count a user confirmed,
    said instead of the records matched."""
    if dry_run:
        return f"would {verb} {tally.moved} record(s) (dry run: nothing moved)"
    whole = f"{agreed} record(s)" if agreed is not None else f"{tally.matched} matching record(s)"
    line = f"{_PAST[verb]} {tally.moved} of {whole}"
    if tally.failed:
        line += f"; {tally.failed} could not be moved and stay in the failed queue"
    if tally.resent:
        line += (
            f"; {tally.resent} sent again after the broker went away before confirming them"
            " (each may run twice; the log names them)"
        )
    unseen = tally.matched - tally.moved - tally.failed
    if unseen > 0:
        line += f"; {unseen} not seen again after a reconnect"
    if tally.reconnects:
        line += f"; resumed after {tally.reconnects} broker reconnect(s)"
    return line


def _held(beside: Beside | None) -> AbstractAsyncContextManager[object]:
    # The copy's read holds records unacked: an action beside it would skip them.
    return nullcontext() if beside is None else beside.copy.lock


async def _reread(beside: Beside | None) -> None:
    if beside is not None:
        await beside.copy.refresh(beside.connection)
