"""Cancels in the worker: a run a tombstone names is not started, and a running attempt of a
run whose tombstone arrives is stopped (``topology/cancel/``).

The worker reads the whole cancels stream before it takes a task, then follows it live. The
check before an attempt is a dict lookup; a running attempt is stopped the way
``asyncio.timeout`` stops one, by cancelling the delivery's own task inside a ``Scope`` that
turns that cancel into a ``cancelled`` result: no task more per attempt.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from types import TracebackType

import structlog
from aio_pika.abc import AbstractConnection, AbstractRobustConnection

from warren_cron.broker.connect import connect
from warren_cron.broker.exclusive import plain_connection
from warren_cron.cancel.book import CancelBook
from warren_cron.cancel.stream import TombstoneFollower, declare_cancels
from warren_cron.cancel.tombstone import Tombstone
from warren_cron.clock import utcnow
from warren_cron.envelope import Envelope
from warren_cron.errors import BROKER_TROUBLE
from warren_cron.names import Names
from warren_cron.runtime.settings import CronSettings
from warren_cron.worker.attempt import Outcome, Result

log = structlog.get_logger("worker")
#: How long attempts wait, once per outage of the cancels stream (and at start), for what it
#: stored meanwhile to be read, counted from the first attempt that waits: long enough for a
#: reconnect, short enough that a stream that cannot be read stalls no one. Past it a cancel
#: read late still stops a running attempt.
PATIENCE_SECONDS = 5.0
#: Pause between two tries to start reading the stream.
RETRY_SECONDS = 1.0
#: The reason of an attempt a cancel ended, or of a run a cancel kept from starting.
CANCELLED = "cancelled"


class Cancels:
    """The tombstones this worker follows, and the attempts it runs that a cancel may stop."""

    def __init__(self, names: Names) -> None:
        self._names = names
        self.book = CancelBook()
        self._scopes: dict[str, Scope] = {}
        self._follower = TombstoneFollower(names, self._on_tombstone)
        #: Set while every tombstone stored so far is known: cleared from a connection loss
        #: until the follower has read what was stored while it was away.
        self._live = asyncio.Event()
        #: When attempts stop waiting for the stream in this outage (``loop.time()``); None
        #: until an attempt waits in it.
        self._patience_ends: float | None = None
        self._connection: AbstractRobustConnection | None = None
        self._catching_up: asyncio.Task[None] | None = None

    @property
    def live(self) -> bool:
        """True while the book holds every tombstone stored so far."""
        return self._live.is_set()

    async def start(self, settings: CronSettings) -> None:
        """Declare the stream and follow it from its first tombstone, over a connection of its
        own; wait (``PATIENCE_SECONDS`` at most) until what it holds is read."""
        # Its own connection: a stream that cannot be read (its replica on this node not
        # running yet, its leader on a lost node) fails that connection's restore again and
        # again, and must not take the consuming connection down with it.
        self._connection = connection = await connect(settings, "warren-worker-cancels")
        marker = await plain_connection(settings, "warren-worker-mark", settings.heartbeat_seconds)
        # Again until it works: after a broker's kill -9 a stream's member can take longer to
        # come back than a declare waits (broker/drops.py), and a worker starting then must
        # wait for it, not exit.
        await _until_done(
            lambda: declare_cancels(connection, self._names, marker), "cannot be declared yet"
        )
        connection.close_callbacks.add(self._lost)
        self._catching_up = asyncio.create_task(self._follow(connection))
        await self.current()

    async def _follow(self, connection: AbstractRobustConnection) -> None:
        """Start following, again until the stream answers (a new stream's replica on this
        node may not run yet), then read up to its end."""
        await _until_done(lambda: self._follower.start(connection), "cannot be read yet")
        connection.reconnect_callbacks.add(self._back)
        await self._caught_up()

    async def current(self) -> None:
        """Wait until the book is live, at most until this outage's patience ends: then
        attempts go on without the stream (said once) rather than the worker stall."""
        now = asyncio.get_running_loop().time()
        if self._patience_ends is None:
            # From the first attempt, not from the loss: a broker that took longer than the
            # patience to restart must not have used it up before any task came in again.
            self._patience_ends = now + PATIENCE_SECONDS
        remaining = self._patience_ends - now
        try:
            await asyncio.wait_for(self._live.wait(), max(remaining, 0))
        except TimeoutError:
            if remaining > 0:
                log.warning("the cancels stream is not read yet; attempts go on without it")

    def _lost(self, *_: object) -> None:
        if self._live.is_set():
            self._patience_ends = None
        self._live.clear()

    def _back(self, connection: AbstractRobustConnection | None) -> None:
        if connection is None:
            return
        if self._catching_up is not None:
            self._catching_up.cancel()
        self._catching_up = asyncio.create_task(
            _until_done(lambda: self._catch_up(connection), "cannot be read again yet")
        )

    async def _catch_up(self, connection: AbstractConnection) -> None:
        """Follow again on a new channel from where the follower was (its start finds where
        the stream ends now), and wait until the follower has read that far."""
        # A new consumer, not only the one the reconnect restored: that one may have been
        # attached before the stream ran again, and missed a cancel stored just after. The
        # old channel is closed: left open, the connection restores it on every reconnect.
        await self._follower.close()
        await self._follower.start(connection)
        await self._caught_up()

    async def _caught_up(self) -> None:
        await self._follower.wait_caught_up()
        if not self._live.is_set():
            self._live.set()
            log.info("cancels stream read", tombstones=len(self.book))

    async def close(self) -> None:
        """Stop following the stream and close its connection."""
        if self._catching_up is not None:
            self._catching_up.cancel()
        await self._follower.stop()
        if self._connection is not None:
            await self._connection.close()

    def scope(self, envelope: Envelope) -> Scope:
        """The scope an attempt of ``envelope`` runs in; its ``stopped`` is already set when a
        tombstone names the run (then the attempt must not start)."""
        found = self.book.stopping(envelope.run_id, envelope.schedule, envelope.scheduled_for)
        return Scope(self._scopes, envelope.run_id, found)

    def _on_tombstone(self, tombstone: Tombstone) -> None:
        if not self.book.add(tombstone, utcnow()) or tombstone.run_id is None:
            return
        running = self._scopes.get(tombstone.run_id)
        if running is not None:
            log.warning("cancelling a running attempt", run_id=tombstone.run_id, by=tombstone.by)
            running.cancel(tombstone)


async def _until_done(step: Callable[[], Awaitable[None]], trouble: str) -> None:
    """``step`` again every ``RETRY_SECONDS`` while it fails for broker trouble."""
    while True:
        try:
            await step()
        except BROKER_TROUBLE as error:
            log.warning(f"the cancels stream {trouble}; trying again", error=repr(error))
            await asyncio.sleep(RETRY_SECONDS)
        else:
            return


class Scope:
    """Where one attempt runs: a cancel of its run cancels the task, and the scope turns that
    into ``stopped`` rather than letting the ``CancelledError`` out."""

    __slots__ = ("_run_id", "_scopes", "_task", "stopped")

    def __init__(
        self, scopes: dict[str, Scope], run_id: str, stopped: Tombstone | None = None
    ) -> None:
        self._scopes = scopes
        self._run_id = run_id
        self._task: asyncio.Task[object] | None = None
        #: The tombstone that stopped the attempt (or kept it from starting).
        self.stopped = stopped

    def result(self) -> Result:
        """The attempt's result once ``stopped``."""
        assert self.stopped is not None
        return Result(Outcome.CANCELLED, CANCELLED, self.stopped.why())

    def cancel(self, tombstone: Tombstone) -> None:
        """Stop the attempt running in this scope (once)."""
        if self.stopped is None and self._task is not None:
            self.stopped = tombstone
            self._task.cancel()

    def enter(self) -> None:
        """The attempt begins in the current task: a cancel of its run now cancels the task."""
        self._task = asyncio.current_task()
        # One attempt per run id at a time is the rule: a duplicate delivery running beside
        # it takes the entry over, and only the newer one can be cancelled.
        self._scopes[self._run_id] = self

    def leave(self, cancelled: bool) -> bool:
        """The attempt ended (by a ``CancelledError`` when ``cancelled``); True when this
        scope's cancel alone ended it: its result is ``result()``. An attempt that ended on
        its own with a cancel on its way must then ``absorb()`` it (``stopped`` is set)."""
        if self._scopes.get(self._run_id) is self:
            del self._scopes[self._run_id]
        if self.stopped is None or self._task is None or not cancelled:
            return False
        # Ours alone (a shutdown's cancel as well goes on out): the attempt ends cancelled.
        return self._task.uncancel() == 0

    async def __aenter__(self) -> Scope:
        self.enter()
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        took = self.leave(kind is asyncio.CancelledError)
        if kind is None and self.stopped is not None:
            await self.absorb()
        return took

    async def absorb(self) -> None:
        """The attempt ended before our cancel reached it: its result stands, and the cancel
        still pending on the task is taken here rather than in the settling that follows."""
        self.stopped = None
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)
        assert self._task is not None
        if self._task.uncancel() > 0:
            raise asyncio.CancelledError
