"""Runs read from the history stream: where one stands (show), its story, the wait for its
end, and the newest runs (list). The command, the HTTP API, the dashboard and the client
call these; a run's state is ``history/lifecycle.py``'s, its story ``history/run_fold.py``'s.

Reads a viewer of the monitor asks for are bounded (a ``Budget``, see ``ops/scans.py``);
the command's and the client's are not, as ``warren history`` reads what it is asked to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from typing import Protocol

from aio_pika.abc import AbstractConnection

from warren_cron.clock import utcnow
from warren_cron.errors import RunTimeout
from warren_cron.history.events import Event
from warren_cron.history.follow import StreamFollower
from warren_cron.history.lifecycle import RunStatus, status_of
from warren_cron.history.reader import Budget
from warren_cron.history.recent import (
    CLOCK_SLACK,
    Locate,
    one_run,
    recent_runs,
    story_start,
    timeless_run,
)
from warren_cron.history.run_fold import Run, run_time
from warren_cron.names import Names

#: A read of the stream within a budget, as the monitor's gate takes it.
Read = Callable[[Budget], Coroutine[object, object, Run | None]]
#: Runs a read through the monitor's gate (``ops/scans.py``); each surface tells a refusal
#: its own way.
Scan = Callable[[Read], Awaitable[tuple[Run | None, Budget]]]


class KeptRuns(Protocol):
    """The runs a monitor keeps in memory from the history it follows."""

    def whole(self, run_id: str) -> Run | None:
        """The run, if it is kept with its start (its whole story); else None."""

    def newest(self, want: Callable[[Run], bool], limit: int) -> list[Run]:
        """The ``limit`` newest kept runs that ``want`` accepts."""


class Retention(Protocol):
    """How long the history keeps its events."""

    @property
    def history_max_age_seconds(self) -> int:
        """Seconds the history stream keeps an event."""


class Offsets(Protocol):
    """A monitor's index of where each minute begins in the history stream."""

    def offset_at(self, moment: datetime) -> int | None:
        """An offset at or before every event of ``moment`` or later; None if unknown."""


class FollowedHistory(Protocol):
    """What a monitor keeps of the history it follows, and what it reads the rest with."""

    @property
    def recent(self) -> KeptRuns:
        """The runs it keeps."""

    @property
    def offsets(self) -> Offsets:
        """Where each minute begins in the stream."""

    @property
    def connection(self) -> AbstractConnection:
        """Its broker connection."""

    @property
    def names(self) -> Names:
        """Its namespace's names."""

    @property
    def settings(self) -> Retention:
        """Its settings (the history's retention)."""


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs a list shows: a schedule glob, a state (``lifecycle``'s) or an outcome
    (the story's); None takes any."""

    schedule: str | None = None
    state: str | None = None
    outcome: str | None = None

    def accepts(self, run: Run) -> bool:
        """True when ``run`` passes every filter set."""
        if self.schedule is not None and not fnmatchcase(run.schedule or "", self.schedule):
            return False
        if self.outcome is not None and run.outcome != self.outcome:
            return False
        return self.state is None or status_of(run.run_id, run, utcnow()).state == self.state


async def run_events(
    connection: AbstractConnection, stream: str, run_id: str, since: datetime | None = None
) -> Run | None:
    """Every event of ``run_id`` from ``since``, else from shortly before the time its id
    names, else from the stream's start; None if it has none (unbounded: the command's and
    the client's read)."""
    return await one_run(connection, stream, run_id, story_start(run_id, since))


async def run_status(
    connection: AbstractConnection, stream: str, run_id: str, due: datetime | None = None
) -> RunStatus:
    """Where ``run_id`` stands now, from its events in ``stream`` (show)."""
    run = await run_events(connection, stream, run_id)
    return status_of(run_id, run, utcnow(), due)


async def wait_for_end(
    connection: AbstractConnection,
    stream: str,
    run_id: str,
    timeout: float | None,  # noqa: ASYNC109 - RunHandle.wait's timeout, as its peers offer
) -> RunStatus:
    """Follow ``stream`` until ``run_id`` ends; ``RunTimeout`` after ``timeout`` seconds."""
    run, ended = Run(run_id), asyncio.Event()

    def on_events(events: list[Event], offset: int) -> None:
        mine = [event for event in events if event.run_id == run_id]
        for event in mine:
            run.apply(event)
        if mine and status_of(run_id, run, utcnow()).done:
            ended.set()

    began = run_time(run_id)
    since = None if began is None else began - CLOCK_SLACK
    follower = StreamFollower(stream, on_events, since=since)
    await follower.start(connection)
    try:
        async with asyncio.timeout(timeout):
            await ended.wait()
    except TimeoutError:
        raise RunTimeout(f"run {run_id} did not end within {timeout}s; it may still") from None
    finally:
        await follower.stop()
    return status_of(run_id, run, utcnow())


async def run_story(
    connection: AbstractConnection,
    stream: str,
    run_id: str,
    budget: Budget,
    kept_for: timedelta,
    locate: Locate | None = None,
) -> Run | None:
    """One run's story from the stream within ``budget``: from shortly before the time its id
    names (at the offset ``locate`` finds), else (``key:...``) from the newest events back
    over the history's retention ``kept_for``."""
    if run_time(run_id) is None:
        return await timeless_run(connection, stream, run_id, utcnow() - kept_for, budget)
    start = story_start(run_id, None) if locate is None else story_start(run_id, None, locate)
    return await one_run(connection, stream, run_id, start, budget)


async def shown_run(
    history: FollowedHistory, run_id: str, scan: Scan
) -> tuple[Run | None, Budget | None]:
    """One run as a monitor shows it: from memory when it keeps the run's whole story (no
    read: no budget), else its story read from the stream through ``scan``."""
    run = history.recent.whole(run_id)
    if run is not None:
        return run, None
    kept_for = timedelta(seconds=history.settings.history_max_age_seconds)
    connection, stream = history.connection, history.names.history_stream
    locate = history.offsets.offset_at

    async def read(budget: Budget) -> Run | None:
        return await run_story(connection, stream, run_id, budget, kept_for, locate)

    return await scan(read)


async def list_runs(
    connection: AbstractConnection,
    stream: str,
    which: RunFilter,
    limit: int,
    since: datetime,
    budget: Budget | None = None,
) -> list[Run]:
    """The ``limit`` newest runs ``which`` accepts with events since ``since``, newest first."""
    return await recent_runs(connection, stream, which.accepts, limit, since, None, budget)


def kept_runs(kept: KeptRuns, which: RunFilter, limit: int) -> list[Run]:
    """The ``limit`` newest runs ``which`` accepts among those the monitor keeps."""
    return kept.newest(which.accepts, limit)
