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
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from aio_pika.abc import AbstractConnection

from topology.envelope import utcnow
from topology.history.reader import Start, read_stream
from topology.history.runs import Run, fold_runs, run_time

FIRST_WINDOW = timedelta(minutes=5)
GROWTH = 4
#: A run's events follow the time in its run id; reading starts this much earlier, for
#: clocks that differ between the scheduler's host and the broker's.
CLOCK_SLACK = timedelta(minutes=5)
_LONG_AGO = datetime.min.replace(tzinfo=UTC)

Want = Callable[[Run], bool]


def windows(since: datetime, now: datetime) -> list[datetime]:
    """Where each window to read starts, the newest first; the last one is ``since``."""
    starts, size = [], FIRST_WINDOW
    while now - size > since:
        starts.append(now - size)
        size *= GROWTH
    return [*starts, since]


async def runs_from(connection: AbstractConnection, stream: str, start: Start) -> list[Run]:
    """Every run with events from ``start`` to the stream's end."""
    events = [event async for event in read_stream(connection, stream, start)]
    return list(fold_runs(events).values())


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
) -> list[Run]:
    """The ``limit`` newest runs that ``want`` accepts among those with events since
    ``since``, read in growing windows (see the module's docstring)."""
    found: list[Run] = []
    for start in windows(since, now or utcnow()):
        found = [run for run in await runs_from(connection, stream, start) if want(run)]
        if len(found) >= limit:
            break
    return newest_first(found)[:limit]


def story_start(run_id: str, since: datetime | None) -> Start:
    """Where to read one run's events from: ``since``, else shortly before its run id's
    time, else the stream's first event."""
    if since is not None:
        return since
    began = run_time(run_id)
    return "first" if began is None else began - CLOCK_SLACK


async def one_run(
    connection: AbstractConnection, stream: str, run_id: str, start: Start
) -> Run | None:
    """The run ``run_id`` with its events from ``start`` to the stream's end; None if none."""
    stream_events = read_stream(connection, stream, start)
    events = [event async for event in stream_events if event.run_id == run_id]
    return fold_runs(events).get(run_id)
