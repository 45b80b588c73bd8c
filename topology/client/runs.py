"""Run handles: what became of a run, and its result once it ends, from the history stream.

``status()`` reads the run's events once; ``result()`` follows the stream live from shortly
before the run's time (``topology/history/follow.py``), so it learns of the run's end as the
worker writes it, without polling any queue.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any, Protocol

from aio_pika.abc import AbstractChannel, AbstractConnection

from warren_cron.cancel.request import CancelAnswer, cancel_run
from warren_cron.cancel.tombstone import checked_reason, checked_run_id
from warren_cron.clock import utcnow
from warren_cron.errors import RunFailed, RunTimeout, broker_failures
from warren_cron.history.events import Event, who
from warren_cron.history.follow import StreamFollower
from warren_cron.history.lifecycle import RunStatus, status_of
from warren_cron.history.recent import CLOCK_SLACK, one_run, story_start
from warren_cron.history.runs import Run, run_time
from warren_cron.names import Names


async def run_status(
    connection: AbstractConnection, stream: str, run_id: str, due: datetime | None = None
) -> RunStatus:
    """Where ``run_id`` stands now, from its events in ``stream``."""
    run = await one_run(connection, stream, run_id, story_start(run_id, None))
    return status_of(run_id, run, utcnow(), due)


async def wait_for_end(
    connection: AbstractConnection, stream: str, run_id: str, timeout: float | None
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


def result_of(status: RunStatus) -> Any:
    """The result of an ended run, or ``RunFailed`` with its error."""
    if status.state != "succeeded":
        raise RunFailed(status.run_id, status.state, status.error or status.reason)
    return status.result


class HistoryAccess(Protocol):
    """What a handle needs of its client: a connection and the history stream's name."""

    async def history_access(self) -> tuple[AbstractConnection, str]:
        """The client's connection (made if need be) and its history stream."""

    async def cancel_access(self) -> tuple[AbstractChannel, Names]:
        """A channel with publisher confirms and the namespace's names."""


class RunHandle:
    """One run, by id: ``await handle.status()``, ``await handle.result(timeout=60)``."""

    def __init__(self, client: HistoryAccess, run_id: str, due: datetime | None = None) -> None:
        self._client = client
        self.run_id = run_id
        #: When it was enqueued for, if this handle came from the enqueue.
        self.due = due

    def __repr__(self) -> str:
        return f"RunHandle({self.run_id!r})"

    async def status(self) -> RunStatus:
        """Where the run stands now: its state and every attempt."""
        with broker_failures(f"the status of run {self.run_id!r}"):
            connection, stream = await self._client.history_access()
            return await run_status(connection, stream, self.run_id, self.due)

    async def wait(self, timeout: float | None = None) -> RunStatus:
        """Wait for the run to end, however it ends, and return its status; ``RunTimeout``
        after ``timeout`` seconds."""
        with broker_failures(f"the wait for run {self.run_id!r}"):
            connection, stream = await self._client.history_access()
            return await wait_for_end(connection, stream, self.run_id, timeout)

    async def result(self, timeout: float | None = None) -> Any:
        """Wait for the run to end and return the handler's return value; ``RunFailed`` when
        it failed, expired or was cancelled, ``RunTimeout`` after ``timeout`` seconds."""
        return result_of(await self.wait(timeout))

    async def cancel(
        self, reason: str | None = None, *, by: str | None = None, until: datetime | None = None
    ) -> CancelAnswer:
        """Cancel the run: not started, it never starts; running, its attempt is stopped on
        whichever worker runs it. Either way it ends ``cancelled``. A run that ended already
        is left as it is (``cancelled`` False in the answer). ``until``: keep the cancel that
        long at least, for a run due more than 30 days ahead. ``CancelError`` for a bad
        run id or a reason over 500 characters."""
        checked_run_id(self.run_id)  # before reading the history for it
        reason = checked_reason(reason)
        status = await self.status()
        with broker_failures(f"the cancel of run {self.run_id!r}"):
            channel, names = await self._client.cancel_access()
            return await cancel_run(channel, names, status, by or who(), reason, until)
