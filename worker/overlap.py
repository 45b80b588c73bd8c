"""Overlap policy: an attempt of a ``Forbid`` or ``Replace`` schedule holds a lock while it runs.

The lock is the exclusive queue ``<ns>_lock.<schedule>``, declared on a connection that the
attempt opens for itself and closes when it ends: only one connection can hold an exclusive
queue, the broker deletes it with the connection, so a crashed holder frees the lock, on any
host, with nothing but the broker.

- ``Forbid``: a run that finds the lock held is not run; it is acked as ``lock-contended``,
  no retry spent.
- ``Replace``: it publishes a cancel message into the held queue; the holder consumes it,
  cancels its attempt (acked as ``replaced``, not retried) and frees the lock. The new run
  takes the lock within half its timeout, or falls back to ``Forbid``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import aio_pika
import orjson
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractIncomingMessage,
    AbstractQueue,
)
from aio_pika.exceptions import DeliveryError

from warren_cron.broker.connect import open_channel
from warren_cron.broker.exclusive import exists, plain_connection, try_exclusive
from warren_cron.envelope import Envelope
from warren_cron.errors import BROKER_TROUBLE
from warren_cron.names import Names
from warren_cron.worker.attempt import Outcome, Result
from warren_cron.worker.context import TaskContext

if TYPE_CHECKING:  # the settings import this module (through the concurrency limits)
    from warren_cron.worker.settings import WorkerSettings

#: Pause between two tries to take a lock that a replaced run is giving up.
RETRY_SECONDS = 0.1
#: Seconds between two cancel messages to whoever holds the lock.
CANCEL_EVERY_SECONDS = 1.0

#: Errors of taking the lock and opening its lease's channel (within a lease's length).
OPENING_TROUBLE: tuple[type[BaseException], ...] = (TimeoutError, *BROKER_TROUBLE)

Attempt = Callable[[], Coroutine[Any, Any, Result]]


def guarded(envelope: Envelope) -> bool:
    """True when an attempt runs under its schedule's lock (``Forbid``, ``Replace``)."""
    return envelope.concurrency != "Allow" and envelope.schedule is not None


async def run_guarded(
    settings: WorkerSettings, envelope: Envelope, ctx: TaskContext, attempt: Attempt
) -> Result:
    """Run ``attempt`` under the envelope's overlap policy."""
    schedule = envelope.schedule
    if not guarded(envelope) or schedule is None:
        return await attempt()
    names = Names(settings.namespace)
    queue = names.lock_queue(schedule)
    holder = names.lock_holder_queue(schedule, envelope.run_id)
    try:
        connection = await _connect(settings, queue)
    except BROKER_TROUBLE as error:
        return _unavailable(queue, error)
    async with connection:
        try:
            lock = await _take(connection, queue, holder, envelope, ctx)
            if isinstance(lock, Result):
                return lock
            stop = await _watch(connection, lock, queue)
            await try_exclusive(connection, holder)  # goes with the lock, on its connection
            # Opened before the attempt: a channel still opening when a quick attempt ended
            # was cancelled mid-call, and aiormq closed it with a warning, every attempt.
            lease = Lease(await _lease_channel(connection, settings), queue, stop, settings)
        except OPENING_TROUBLE as error:
            return _unavailable(queue, error)
        return await lease.run(attempt, ctx)


async def _take(
    connection: AbstractConnection, queue: str, holder: str, envelope: Envelope, ctx: TaskContext
) -> AbstractQueue | Result:
    """The lock, or what a run that finds it held comes to."""
    lock = await _acquire(connection, queue, envelope, ctx)
    if lock is not None:
        return lock
    if await exists(connection, holder):
        return _held_by_lost_attempt(f"{queue} is still held by a lost attempt of this run")
    # A lost attempt's lock may have gone with its holder between the two looks: look again.
    lock = await try_exclusive(connection, queue)
    return lock if lock is not None else _contended(queue, envelope, ctx)


def _contended(queue: str, envelope: Envelope, ctx: TaskContext) -> Result:
    """Forbid's skip, unless this run's own lost attempt may hold the lock: lost with its node or
    connection, the lock lingers until the broker notices, and skipping would lose the run."""
    if ctx.redelivered:
        # The broker may remove a lost connection's holder queue before its lock: a run handed
        # out before cannot tell, so it retries; the retry is a fresh delivery, skipped if the
        # lock is still held then.
        return _held_by_lost_attempt(f"{queue} is held, and this run was handed out before")
    return Result(
        Outcome.CONTENDED,
        "lock-contended",
        f"another run of {envelope.schedule!r} holds {queue} ({envelope.concurrency})",
    )


def _held_by_lost_attempt(why: str) -> Result:
    return Result(
        Outcome.RETRYABLE, "lock-held-by-lost-attempt", f"{why}; retried once the broker frees it"
    )


def _unavailable(queue: str, error: BaseException) -> Result:
    # Retried like any broker hiccup: the message must never stay unsettled.
    return Result(Outcome.RETRYABLE, "lock-unavailable", f"cannot take {queue}: {error!r}")


async def _connect(settings: WorkerSettings, queue: str) -> AbstractConnection:
    # A plain connection of its own: closing it is what releases the lock.
    return await plain_connection(settings, f"warren-lock {queue}", settings.heartbeat_seconds)


async def _acquire(
    connection: AbstractConnection, queue: str, envelope: Envelope, ctx: TaskContext
) -> AbstractQueue | None:
    lock = await try_exclusive(connection, queue)
    if lock is not None or envelope.concurrency == "Forbid":
        return lock
    deadline = time.monotonic() + ctx.timeout_seconds / 2
    next_cancel = time.monotonic()
    while time.monotonic() < deadline:
        if time.monotonic() >= next_cancel:
            await send_cancel(connection, queue, envelope.run_id)
            next_cancel = time.monotonic() + CANCEL_EVERY_SECONDS
        await asyncio.sleep(RETRY_SECONDS)
        if (lock := await try_exclusive(connection, queue)) is not None:
            return lock
    ctx.log.warning("the running attempt did not give up the lock in time", lock=queue)
    return None


async def send_cancel(connection: AbstractConnection, queue: str, run_id: str) -> None:
    """Ask whoever holds ``queue`` to cancel its attempt in favour of ``run_id``."""
    channel = await open_channel(connection, publisher_confirms=True, on_return_raises=True)
    body = orjson.dumps({"cancel": True, "replaced_by": run_id})
    try:
        await channel.default_exchange.publish(aio_pika.Message(body), queue, mandatory=True)
    except DeliveryError:
        pass  # returned: the lock is gone already, the next try takes it
    finally:
        await channel.close()


async def _watch(
    connection: AbstractConnection, lock: AbstractQueue, queue: str
) -> asyncio.Future[Result]:
    """A future that says why the attempt holding ``lock`` must stop early, if it must."""
    stop: asyncio.Future[Result] = asyncio.get_running_loop().create_future()

    def lost(*_: object) -> None:
        # Without the lock another run may start: this one must not go on.
        _lost(stop, f"lost the lock {queue}")

    async def on_cancel(message: AbstractIncomingMessage) -> None:
        if not stop.done():
            by = _replaced_by(message.body)
            stop.set_result(Result(Outcome.REPLACED, "replaced", f"replaced by {by}"))

    connection.close_callbacks.add(lost)
    await lock.consume(on_cancel, no_ack=True, exclusive=True)
    return stop


def _lost(stop: asyncio.Future[Result], why: str) -> None:
    if not stop.done():
        stop.set_result(Result(Outcome.RETRYABLE, "lock-lost", why))


async def _lease_channel(
    connection: AbstractConnection, settings: WorkerSettings
) -> AbstractChannel:
    """The channel the lease asks on, open within a lease's length."""
    async with asyncio.timeout(settings.lock_lease_seconds):
        return await open_channel(connection)


class Lease:
    """While an attempt runs, ask its lock's node every quarter of the lease whether the lock
    is there; no answer for a whole lease stops the attempt."""

    # A node cut off from its cluster (frozen, partitioned) may keep this connection open
    # for as long as the heartbeat allows, while the other nodes drop its exclusive queues
    # after their net tick time and another run takes the lock: the holder must stop first.

    def __init__(
        self,
        channel: AbstractChannel,
        queue: str,
        stop: asyncio.Future[Result],
        settings: WorkerSettings,
    ) -> None:
        self._channel, self._queue, self._stop = channel, queue, stop
        self._seconds = settings.lock_lease_seconds
        self._ended = asyncio.Event()

    async def run(self, attempt: Attempt, ctx: TaskContext) -> Result:
        """Run ``attempt`` while the lease is kept."""
        keeper = asyncio.create_task(self._keep())
        try:
            return await _run_until_stopped(attempt, self._stop, ctx)
        finally:
            # Told to end, not cancelled: a look cancelled in flight makes aiormq close its
            # channel with a warning. It ends at once, or when its look is answered.
            self._ended.set()
            await asyncio.gather(keeper, return_exceptions=True)

    async def _keep(self) -> None:
        answered = asyncio.get_running_loop().time()
        with contextlib.suppress(TimeoutError, *BROKER_TROUBLE):
            # The lock was just taken: the first look is a quarter of the lease away.
            while not await self._ended_within(self._seconds / 4):
                async with asyncio.timeout_at(answered + self._seconds):
                    await self._channel.declare_queue(self._queue, passive=True)
                answered = asyncio.get_running_loop().time()
            return
        why = f"the node of the lock {self._queue} did not answer for {self._seconds:g} s"
        _lost(self._stop, why)

    async def _ended_within(self, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._ended.wait()
        return self._ended.is_set() or self._stop.done()


async def _run_until_stopped(
    attempt: Attempt, stop: asyncio.Future[Result], ctx: TaskContext
) -> Result:
    work = asyncio.create_task(attempt())
    try:
        await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not work.done():
            work.cancel()  # replaced, lock lost, or the worker is shutting down
            await asyncio.gather(work, return_exceptions=True)
    if not work.cancelled():
        return work.result()
    result = stop.result()
    ctx.log.warning("attempt cancelled", reason=result.reason, detail=result.error)
    return result


def _replaced_by(body: bytes) -> str:
    # Any message in the lock queue is a cancel; the run id is for the log only.
    try:
        return str(orjson.loads(body)["replaced_by"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return "another run"
