"""Find runs in the history stream: the newest ones, and every event of one run.

A busy install writes millions of events a day, so ``recent_runs`` does not read all of the
time asked for: it reads the last 5 minutes, then the last 20, then 80 ... (each window four
times the one before, the last one reaching ``since``), and stops at the first window that
holds ``limit`` matching runs. Reading each window whole again costs at most a third more
than reading the last one alone. A run that began before the window read is shown with the
events the window holds: its fire and first attempts may be missing, and its ``begun_at`` is
then its first event in the window.

Windows start at a stream timestamp, the broker's time of publishing; the stream starts a
read at a whole chunk, so a window may hold a few events from just before its start.

One run's story is read from shortly before the time in its run id: at the offset where
that time's events begin if the caller knows it (the dashboard keeps an index of them), else
at that stream timestamp. It is read to the stream's end while the run may still change (a
failed run may be replayed days later); a run that has settled (``SETTLED``: succeeded,
skipped, ...) gets no event after its end, so the read stops once it meets an event
``CLOCK_SLACK`` later than that end, which every event of the run, clocks and publishers'
batching allowing, has come before.

Given a ``Budget`` (the monitor gives one to every read a viewer asks for), the reads of one
call hand over at most its number of events, windows read again included; a call cut there
answers what it found, and its budget says so. A run id naming no time (``key:...``) is
looked for in the same growing windows, the newest first, as there is no time to seek to.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from aio_pika.abc import AbstractConnection

from warren_cron.clock import utcnow
from warren_cron.history.events import decode, last_time, mention
from warren_cron.history.reader import Budget, Start, read_messages, read_stream
from warren_cron.history.run_fold import SETTLED, Run, fold_runs, run_time

FIRST_WINDOW = timedelta(minutes=5)
GROWTH = 4
#: How far the clocks of the hosts writing a run's events (and the broker's) may differ, with
#: the time a publisher's batch takes to reach the stream: a run's story is read from this
#: much before the time in its run id, and a settled run's until this much past its end.
CLOCK_SLACK = timedelta(minutes=5)
_LONG_AGO = datetime.min.replace(tzinfo=UTC)
#: Events that begin a run: a read that holds one of its run holds the run's whole story.
STARTS = frozenset({"fired", "triggered", "skipped"})

Want = Callable[[Run], bool]
#: The offset at or before every event of a time and after (an index's), or None if unknown.
Locate = Callable[[datetime], int | None]


def _unknown(moment: datetime) -> int | None:
    return None


def windows(since: datetime, now: datetime) -> list[datetime]:
    """Where each window to read starts, the newest first; the last one is ``since``."""
    starts, size = [], FIRST_WINDOW
    while now - size > since:
        starts.append(now - size)
        size *= GROWTH
    return [*starts, since]


async def runs_from(
    connection: AbstractConnection, stream: str, start: Start, budget: Budget | None = None
) -> list[Run]:
    """Every run with events from ``start`` to the stream's end (or the ``budget``)."""
    # Closed here, not when collected: a cancelled read must end its consumer at once.
    async with contextlib.aclosing(read_stream(connection, stream, start, budget)) as events:
        return list(fold_runs([event async for event in events]).values())


def newest_first(runs: list[Run]) -> list[Run]:
    """Runs sorted by when they began, the latest first."""
    return sorted(runs, key=lambda run: run.begun_at or _LONG_AGO, reverse=True)


async def recent_runs(
    connection: AbstractConnection,
    stream: str,
    want: Want,
    limit: int,
    since: datetime,
    now: datetime | None = None,
    budget: Budget | None = None,
) -> list[Run]:
    """The ``limit`` newest runs that ``want`` accepts among those with events since
    ``since``, read in growing windows (see the module's docstring)."""
    found: dict[str, Run] = {}
    for start in windows(since, now or utcnow()):
        runs = await runs_from(connection, stream, start, budget)
        if budget is not None and budget.cut:
            # Cut short of the newer events: the smaller window before told those whole.
            found = {run.run_id: run for run in runs if want(run)} | found
            break
        found = {run.run_id: run for run in runs if want(run)}
        if len(found) >= limit:
            break
    return newest_first(list(found.values()))[:limit]


def story_start(run_id: str, since: datetime | None, locate: Locate = _unknown) -> Start:
    """Where to read one run's events from: ``since``, else shortly before its run id's
    time (the offset ``locate`` finds for it, else that stream timestamp), else the stream's
    first event."""
    if since is not None:
        return since
    began = run_time(run_id)
    if began is None:
        return "first"
    moment = began - CLOCK_SLACK
    offset = locate(moment)
    return moment if offset is None else offset


async def one_run(
    connection: AbstractConnection,
    stream: str,
    run_id: str,
    start: Start,
    budget: Budget | None = None,
) -> Run | None:
    """The run ``run_id`` with its events from ``start`` on (see the module's docstring for
    where the read stops, ``budget`` too); None if it has none. Only messages that mention
    the run are decoded whole."""
    run, needle = Run(run_id), mention(run_id)

    def past_its_end(body: bytes) -> bool:
        if run.outcome not in SETTLED or run.ended_at is None or needle in body:
            return False
        latest = last_time(body)
        return latest is not None and latest > run.ended_at + CLOCK_SLACK

    reading = read_messages(connection, stream, start, past_its_end, budget)
    async with contextlib.aclosing(reading) as messages:
        async for offset, body in messages:
            if needle in body:
                for event in decode(body, offset):
                    if event.run_id == run_id:
                        run.apply(event)
    return run if run.events else None


async def timeless_run(
    connection: AbstractConnection, stream: str, run_id: str, since: datetime, budget: Budget
) -> Run | None:
    """The run ``run_id``, whose id names no time, from the newest window of events since
    ``since`` that holds its start (``windows``); else from the widest one read."""
    run = None
    for start in windows(since, utcnow()):
        run = await one_run(connection, stream, run_id, start, budget)
        if budget.cut or (run is not None and any(e.type in STARTS for e in run.events)):
            break
    return run
