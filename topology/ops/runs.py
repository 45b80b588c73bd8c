"""Runs read from the history stream: where one stands (show), its story, the wait for its
end, and the newest runs (list). The command, the HTTP API, the dashboard and the client
call these; a run's state is ``history/lifecycle.py``'s, its story ``history/runs.py``'s.

Reads a viewer of the monitor asks for are bounded (a ``Budget``, see ``ops/scans.py``);
the command's and the client's are not, as ``warren history`` reads what it is asked to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
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
from warren_cron.history.runs import Run, run_time


class KeptRuns(Protocol):
    """The runs a monitor keeps in memory from the history it follows."""

    def whole(self, run_id: str) -> Run | None:
        """The run, if it is kept with its start (its whole story); else None."""

    def newest(self, want: Callable[[Run], bool], limit: int) -> list[Run]:
        """The ``limit`` newest kept runs that ``want`` accepts."""


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
