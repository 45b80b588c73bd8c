"""Leadership: the scheduler that is the single active consumer of ``<ns>_scheduler.leader``.

The lock is a quorum queue with ``x-single-active-consumer``: every scheduler consumes it, the
queue's Raft log picks one consumer as the active one, and only that one is handed messages.
Each scheduler publishes a small *probe* naming itself into the queue: a scheduler whose own
probe comes back to it was the active consumer after it sent the probe, so it may lead until
``lease`` seconds after that send (a lease counted from the send, on its own monotonic clock,
so a slow delivery only shortens it). The leader probes every ``lease / 4`` seconds and steps
down when its lease runs out: when its connection or channel dies (the queue then makes the
next consumer active), and when the queue cannot be reached from its node (a minority
partition: nothing is confirmed there, no probe comes back), which no exclusive queue tells.

Why not an exclusive queue: since RabbitMQ 4.2 (Khepri) the majority keeps the exclusive
queues of a node it sees down until that node is back, so a leader lock on a killed node
blocked every takeover. A quorum queue's consumer on a node seen down is dropped (its place
goes to the next consumer) by the queue's majority; a probe then settles who leads.

Probes of others reach the leader, which holds the newest of each session unacked for up to
``HOLD_SECONDS``: when its connection dies, the queue gives them back to the consumer it
makes active next, which finds its own among them and leads at once, not at its next probe
(``CRON_LEADER_RETRY_SECONDS`` apart). A probe sent while no consumer is active waits in the
queue, at most ``PROBES_KEPT`` of them. A leader that stops (SIGTERM) releases the lock at
once: once its fire loop has ended it cancels its consumer, so the queue makes a standby
active, gives the probes it held back, and publishes a *release* note that a standby whose
probe it did not hold answers with a probe. The connection is a plain one
(``topology.broker.exclusive``): a lost connection ends the leadership, always.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from typing import Any

import aio_pika
import orjson
import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage, AbstractQueue
from aiormq.exceptions import ChannelLockedResource

from warren_cron.broker.connect import open_channel
from warren_cron.broker.exclusive import plain_connection
from warren_cron.errors import BROKER_TROUBLE
from warren_cron.names import Names
from warren_cron.scheduler.settings import SchedulerSettings

log = structlog.get_logger("scheduler")
#: Probes kept while no consumer is active (the oldest go first): a handful per standby.
PROBES_KEPT = 100
#: How long the leader holds another session's newest probe unacked, at most (and at most a
#: quarter lease): well under any broker's ``consumer_timeout`` (a few seconds on the fault
#: suite's nodes; RabbitMQ 4 cancels a quorum queue's consumer that holds one longer), and
#: most of the default 3 s between two probes of a standby.
HOLD_SECONDS = 2.0
#: What a probe's publish may end with: broker trouble, or no confirm within a lease.
PROBE_ERRORS: tuple[type[BaseException], ...] = (*BROKER_TROUBLE, TimeoutError)
#: The lock queue's arguments: one active consumer, decided by a Raft majority.
LOCK_ARGUMENTS: dict[str, Any] = {
    "x-queue-type": "quorum",
    "x-single-active-consumer": True,
    "x-max-length": PROBES_KEPT,
    "x-overflow": "drop-head",
}


def identity() -> str:
    """Who this scheduler is, in logs and in the broker's connection list."""
    return f"{socket.gethostname()}:{os.getpid()}"


async def open_connection(settings: SchedulerSettings) -> AbstractConnection:
    """A plain (non-robust) connection with the scheduler's short heartbeat."""
    name = f"warren-scheduler {identity()}"
    return await plain_connection(settings, name, settings.scheduler_heartbeat_seconds)


def lease_seconds(settings: SchedulerSettings) -> float:
    """How long one returned probe lets a scheduler lead: twice the scheduler's heartbeat."""
    return 2.0 * settings.scheduler_heartbeat_seconds


class LeaderLock:
    """One session's claim on the lock queue: probes, the lease, and ``lost`` when it ends."""

    def __init__(
        self, connection: AbstractConnection, names: Names, lease: float, queue: str = ""
    ) -> None:
        self.names = names
        self.lease = lease
        #: The lock queue: the one leader queue, or a partition's (``scheduler/leases.py``),
        #: whose standing by the partitions' leases tell once for all.
        self.queue = queue or names.leader_queue
        self._announce = self.queue == names.leader_queue
        #: Set when the connection closes or the lease runs out: stop publishing at once.
        self.lost = asyncio.Event()
        connection.close_callbacks.add(lambda *_: self.lost.set())
        self._connection = connection
        self._session = uuid.uuid4().hex
        self._sent: dict[int, float] = {}  # probe number -> monotonic send time
        self._seq = 0
        self._lease_until = 0.0
        self._proved = asyncio.Event()
        self._channel: AbstractChannel | None = None
        self._consumer: tuple[AbstractQueue, str] | None = None
        self._probes: set[asyncio.Task[None]] = set()
        #: The newest probe of each other session, unacked (``HOLD_SECONDS`` at most).
        self._held: dict[str, AbstractIncomingMessage] = {}

    async def open(self) -> bool:
        """Declare the queue and consume it; False while an older scheduler's exclusive queue
        of the same name holds it (a fleet being upgraded: the old leader keeps leading)."""
        # BrokerUnavailable, not aiormq's bare RuntimeError, when the connection died meanwhile.
        channel = await open_channel(self._connection, publisher_confirms=True)
        try:
            queue = await channel.declare_queue(self.queue, durable=True, arguments=LOCK_ARGUMENTS)
        except ChannelLockedResource:
            return False
        self._consumer = (queue, await queue.consume(self._on_message))
        self._channel = channel
        channel.close_callbacks.add(lambda *_: self.lost.set())
        return True

    def holds(self) -> bool:
        """True while a probe of this session came back less than ``lease`` ago (send time)."""
        return not self.lost.is_set() and time.monotonic() < self._lease_until

    async def acquire(self, every: float, stop: asyncio.Event) -> bool:
        """Probe every ``every`` seconds until this session holds the lock (True) or ``stop``
        is set or the connection is lost (False)."""
        announced = False
        while not stop.is_set() and not self.lost.is_set():
            self.probe()
            self._proved.clear()
            await first_of(self._proved, stop, self.lost, seconds=every)
            if self.holds():
                return True
            if not announced and self._announce:
                log.info("standing by: another scheduler leads", queue=self.queue)
                announced = True
        return False

    async def keep(self) -> None:
        """While leading: probe every quarter lease; set ``lost`` once the lease runs out."""
        every = self.lease / 4
        next_probe = time.monotonic()
        while not self.lost.is_set():
            now = time.monotonic()
            if now >= self._lease_until:
                log.warning("leader lease ran out: no probe came back", lease_s=self.lease)
                self.lost.set()
                return
            if now >= next_probe:
                self.probe()
                next_probe = now + every
            await asyncio.sleep(max(min(next_probe, self._lease_until) - now, 0.0))

    def probe(self) -> None:
        """Publish one probe naming this session, in the background (its confirm is not
        waited for: a probe that does not come back simply proves nothing)."""
        now = time.monotonic()
        for stale in [n for n, sent in self._sent.items() if sent + self.lease < now]:
            del self._sent[stale]  # it could prove nothing any more: a standby keeps a few
        self._seq += 1
        self._sent[self._seq] = now
        task = asyncio.create_task(self._publish(self._seq))
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)

    async def release(self) -> None:
        """Hand the lock on now (the fire loop must have ended): stop consuming, so the queue
        makes the next consumer active, give back the probes held, so it proves itself with
        its own, and tell it with a release note, so it probes at once if none was its own.
        Broker trouble only leaves the standby to its next probe."""
        if self._consumer is None or self._channel is None or self._channel.is_closed:
            return
        queue, tag = self._consumer
        self._lease_until = 0.0
        try:
            await asyncio.wait_for(queue.cancel(tag), self.lease)
            await self._give_back()
            await self._send({"released": True})
        except PROBE_ERRORS as error:
            log.debug("leader release not confirmed", error=repr(error))
            return
        log.info("leadership released", queue=self.queue)

    async def _give_back(self) -> None:
        held, self._held = self._held, {}
        for message in held.values():
            await message.nack(requeue=True)

    async def close(self) -> None:
        """Stop probing (the connection's close ends the consumer)."""
        for task in list(self._probes):
            task.cancel()
        await asyncio.gather(*self._probes, return_exceptions=True)

    async def resume(self) -> None:
        """Consume the lock again after a ``release``, at the back of the queue's consumers."""
        assert self._consumer is not None, "open() first"
        queue, _ = self._consumer
        self._sent.clear()
        self._lease_until = 0.0
        self._consumer = (queue, await queue.consume(self._on_message))

    async def _publish(self, seq: int) -> None:
        if self._channel is None or self._channel.is_closed:
            return
        try:
            await self._send({"seq": seq})
        except PROBE_ERRORS as error:
            log.debug("leader probe not confirmed", error=repr(error))

    async def _send(self, fields: dict[str, Any]) -> None:
        """Publish a note of this session into the lock queue, confirmed within a lease."""
        assert self._channel is not None
        note = {"session": self._session, **fields, "scheduler": identity()}
        # Unconfirmed past a lease it proves nothing: give up on it (a node cut off from
        # the majority confirms nothing, and the probes must not pile up meanwhile).
        await asyncio.wait_for(
            self._channel.default_exchange.publish(
                aio_pika.Message(orjson.dumps(note)), self.queue
            ),
            self.lease,
        )

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        note = _note(message.body)
        try:
            if note is not None and self._another_probe(note):
                await self._hold(note["session"], message)
            else:
                await message.ack()
        except BROKER_TROUBLE:
            return  # the channel is gone: what it held goes back to the queue
        if note is not None:
            self._read(note)

    def _another_probe(self, note: dict[str, Any]) -> bool:
        # At most PROBES_KEPT sessions' probes held: one per scheduler is all it takes.
        session = note["session"]
        room = len(self._held) < PROBES_KEPT or session in self._held
        return room and session != self._session and not note.get("released")

    async def _hold(self, session: str, message: AbstractIncomingMessage) -> None:
        """Keep ``message``, a probe of another session, unacked in place of its last one."""
        previous, self._held[session] = self._held.get(session), message
        task = asyncio.create_task(self._let_go(session, message))
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)
        if previous is not None:
            await previous.ack()

    async def _let_go(self, session: str, message: AbstractIncomingMessage) -> None:
        await asyncio.sleep(min(HOLD_SECONDS, self.lease / 4))
        if self._held.get(session) is message:
            del self._held[session]
            with contextlib.suppress(*BROKER_TROUBLE):
                await message.ack()

    def _read(self, note: dict[str, Any]) -> None:
        session = note["session"]
        if note.get("released"):
            if session != self._session:
                self.probe()  # the leader stepped down and made this one active: prove it
            return
        seq = note.get("seq")
        if session != self._session or seq not in self._sent:
            return  # another scheduler's probe: this one is the active consumer, nothing more
        sent = self._sent[seq]
        for older in [n for n in self._sent if n <= seq]:
            del self._sent[older]
        self._lease_until = max(self._lease_until, sent + self.lease)
        self._proved.set()


def _note(body: bytes) -> dict[str, Any] | None:
    """A probe or release note of the lock queue; None for anything else (dropped)."""
    try:
        note = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(note, dict) or not isinstance(note.get("session"), str):
        return None
    seq = note.get("seq")
    if not note.get("released") and (not isinstance(seq, int) or isinstance(seq, bool)):
        return None
    return note


async def first_of(*events: asyncio.Event, seconds: float | None) -> None:
    """Wait until one of ``events`` is set, or ``seconds`` pass."""
    waits = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
