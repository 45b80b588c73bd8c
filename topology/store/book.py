"""The runtime schedules as one reader sees them: the newest snapshot, the log after it,
then every change as it comes.

The book follows the log on a channel of its own. To know it has read everything, it
appends a marker and waits for it to come back (``sync``). A change is written the same
way: appended with a publisher confirm, then read back, and the fold's verdict on it, the
same for every reader, is the answer: applied, or refused (a version conflict, a name
taken). Whichever writer's change brings the log ``SNAPSHOT_EVERY`` messages (more for a
large store) past the newest snapshot writes the next one, so retention never drops a
change no snapshot holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aio_pika
import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage

from warren_cron.broker.connect import publish_channel
from warren_cron.broker.latest import LatestMessage
from warren_cron.declare import QueueType
from warren_cron.errors import BROKER_TROUBLE, StoreError
from warren_cron.history.reader import consuming, stream_end, stream_offset
from warren_cron.names import Names
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store import streams
from warren_cron.store.acks import TurnAcks
from warren_cron.store.changes import Change
from warren_cron.store.outbox import Outbox
from warren_cron.store.parts import read_parts, write_parts
from warren_cron.store.snapshot import SnapshotIndex, read_snapshot, snapshot_bodies
from warren_cron.store.state import StoreState

log = structlog.get_logger("store")
#: Log messages past the newest snapshot before a writer takes the next one: at least
#: this many, a tenth of the schedules when there are more. A snapshot costs time in
#: proportion to the schedules: one every 1,000 creates made a bulk create of 100,000
#: quadratic, and one every 5,000 would spend a bulk create to a million mostly on
#: snapshots of 17 s each.
SNAPSHOT_EVERY = 1000
#: Or once the log past the newest snapshot holds this many bytes: a quarter of what the
#: log keeps, so retention never drops a change that no snapshot holds.
SNAPSHOT_BYTES = streams.LOG_MAX_BYTES // 4
#: Changes are small; streams deliver only to consumers with a prefetch.
PREFETCH = 500
#: A change or marker not read back by then: the broker is in trouble.
SYNC_SECONDS = 30.0
Verdict = StoreError | None


class StoreBook:
    """The runtime schedules, kept current from the log; ``on_change(name)`` after each
    change that applied, ``on_lost()`` if the log's consumer stops."""

    def __init__(
        self,
        names: Names,
        queue_type: QueueType = "classic",
        on_change: Callable[[str], None] | None = None,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self.names = names
        self.queue_type: QueueType = queue_type
        self.state = StoreState()
        self._on_change = on_change
        #: Called if the log's consumer stops (a scheduler's term points it at its lease).
        self.on_lost = on_lost
        #: On a resume, the offset the next message must have: past it, retention dropped
        #: changes this book never read (``_gap``).
        self._resume_at: int | None = None
        self._gap = False
        #: Bytes of the log read since the newest snapshot's note (``SNAPSHOT_BYTES``).
        self._log_bytes = 0
        self._waiting: dict[str, asyncio.Future[Verdict]] = {}
        #: This book's changes on their way: the bytes written and the spec checked.
        self._own: dict[str, tuple[bytes, ScheduleSpec]] = {}
        self._outbox: Outbox | None = None
        self._acks = TurnAcks()
        self._arguments: dict[str, Any] = {}
        self._connection: AbstractConnection | None = None
        self._consuming: AbstractChannel | None = None
        self._publishing: AbstractChannel | None = None
        self._snapshots: LatestMessage | None = None
        #: A snapshot being written: the changes in flight with it write none of their own.
        self._writing: asyncio.Task[None] | None = None

    async def start(self, connection: AbstractConnection) -> bool:
        """Read the newest snapshot, follow the log after it; returns once all is read, True.

        A book started before (and closed) reads only the log after what it holds, and
        returns False: a scheduler leading again after a lost lease or connection catches
        up, where reading a million schedules again took half a minute. If retention has
        dropped part of that log meanwhile, it reads the snapshot after all."""
        await streams.declare_log(connection, self.names)
        self._connection = connection
        self._publishing = await publish_channel(connection)
        self._outbox = Outbox(self._publishing, SYNC_SECONDS)
        self._snapshots = await streams.snapshot_store(
            self._publishing, self.names, self.queue_type
        )
        if self.state.offset >= 0 and await self._caught_up(connection):
            return False
        self.state, self._log_bytes = StoreState(), 0
        await self._read_snapshot()
        after = self.state.offset
        await self._consume(connection, after + 1 if after >= 0 else "first")
        await self.sync()
        return True

    async def _caught_up(self, connection: AbstractConnection) -> bool:
        """Fold the log after this book's offset; False (and no longer consuming) when its
        first message is past the next offset: the changes between are gone."""
        end = await stream_end(connection, self.names.store_log)
        if end is None:
            return False  # an empty log: made anew since
        self._resume_at, self._gap = self.state.offset + 1, False
        # Not past the end: a consumer there waits for that offset, which a log made anew
        # with fewer messages reaches only later (the resume's marker comes back below it).
        await self._consume(connection, min(self._resume_at, end.offset))
        await self.sync()
        self._resume_at = None
        if not self._gap:
            return True
        log.warning(
            "the schedules log after this reader's last read is gone (dropped by retention, "
            "or the log made anew); reading the newest snapshot instead",
            offset=self.state.offset,
        )
        await self._stop_consuming()
        self._gap = False
        return False

    async def _consume(self, connection: AbstractConnection, start: int | str) -> None:
        self._arguments["x-stream-offset"] = start
        self._acks.restart()  # what a closed channel left unacked went with it
        channel, _ = await consuming(connection, self._follow)
        channel.close_callbacks.add(self._closed)
        self._consuming = channel

    async def _follow(self, channel: AbstractChannel) -> None:
        """Consume the log from the offset ``_consume`` set."""
        await channel.set_qos(prefetch_count=PREFETCH)
        # Declared (passively), so the robust channel consumes again after a reconnect.
        queue = await channel.declare_queue(self.names.store_log, passive=True)
        await queue.consume(self._on_message, arguments=self._arguments)

    async def _read_snapshot(self) -> None:
        assert self._snapshots is not None and self._connection is not None
        body = await self._snapshots.read()
        if body is None:
            return
        try:
            read = await read_snapshot(body)
            if isinstance(read, SnapshotIndex):
                read = await read_parts(self._connection, self.names, read)
            self.state = read
        except StoreError as error:
            log.warning("reading every change of the log instead", error=str(error))

    async def sync(self) -> None:
        """Return once every message the log held when called is folded in."""
        message = streams.marker(uuid.uuid4().hex)
        assert message.message_id is not None
        await self._round_trip(message.message_id, self._marked(message))

    async def append(self, change: Change, spec: ScheduleSpec | None = None) -> None:
        """Write ``change`` and read it back; raises the fold's refusal, if any. ``spec``:
        the checked spec ``change.spec`` was made from, folded in as it is (not validated
        again) when the log gives back the very bytes written."""
        assert self._outbox is not None, "start() first"
        message = streams.change_message(change, self.names.store_log)
        if spec is not None:
            self._own[message.message_id] = (message.body, spec)
        try:
            refused = await self._round_trip(message.message_id, self._outbox.send(message))
        finally:
            self._own.pop(message.message_id, None)
        if refused is not None:
            raise refused
        every = max(SNAPSHOT_EVERY, len(self.state.entries) // 10)
        due = self.state.offset - self.state.snapshot_offset >= every
        due = due or self._log_bytes >= SNAPSHOT_BYTES
        if due and (self._writing is None or self._writing.done()):
            # Of many changes in flight together, the first past the mark writes it.
            self._writing = asyncio.ensure_future(self.write_snapshot())
            await asyncio.shield(self._writing)

    async def write_snapshot(self) -> None:
        """Write the state as the newest snapshot, and say so in the log."""
        assert self._snapshots is not None and self._publishing is not None
        assert self._connection is not None
        offset, count = self.state.offset, len(self.state.entries)
        bodies = await snapshot_bodies(self.state)
        if len(bodies) > 1:
            index = await write_parts(
                self._connection, self._publishing, self.names, offset, bodies
            )
            bodies = [index.body()]
        await self._snapshots.write(bodies[0])
        note = streams.snapshot_note(offset, uuid.uuid4().hex)
        await self._publishing.default_exchange.publish(note, self.names.store_log)
        self.state.snapshot_offset = max(self.state.snapshot_offset, offset)
        log.info("schedules snapshot written", offset=offset, schedules=count)

    async def _marked(self, message: aio_pika.Message) -> None:
        assert self._publishing is not None, "start() first"
        await self._publishing.default_exchange.publish(
            message, self.names.store_log, mandatory=True
        )

    async def _round_trip(self, message_id: str, sent: Awaitable[None]) -> Verdict:
        back: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        self._waiting[message_id] = back
        try:
            async with asyncio.timeout(SYNC_SECONDS):
                await sent
                return await back
        except TimeoutError:
            raise StoreError(
                f"the schedules log did not give back a message within {SYNC_SECONDS:g} s; "
                "a change may or may not be applied: get the schedule to see"
            ) from None
        finally:
            self._waiting.pop(message_id, None)

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        offset = stream_offset(message)
        if offset > self.state.offset or self._made_anew(message):
            verdict = None if self._gapped(offset) else self._fold_at(message, offset)
            waiting = self._waiting.get(message.message_id or "")
            if waiting is not None and not waiting.done():
                waiting.set_result(verdict)
        self._acks.read(message)

    def _made_anew(self, message: AbstractIncomingMessage) -> bool:
        # A resume's own marker back at an offset this book read before: the log was
        # deleted and declared again (a namespace torn down), and starts over.
        return self._resume_at is not None and message.message_id in self._waiting

    def _gapped(self, offset: int) -> bool:
        # The first message after a resume tells whether the log holds all after it.
        if self._resume_at is not None:
            self._gap, self._resume_at = offset != self._resume_at, None
        return self._gap

    def _fold_at(self, message: AbstractIncomingMessage, offset: int) -> Verdict:
        verdict = self._fold(message, offset)
        self._log_bytes += len(message.body)
        self.state.offset = offset
        self._arguments["x-stream-offset"] = offset + 1
        return verdict

    def _fold(self, message: AbstractIncomingMessage, offset: int) -> Verdict:
        if message.type == streams.SNAPSHOT:
            covered = streams.read_note(message.body)
            if covered is not None:
                self.state.snapshot_offset = max(self.state.snapshot_offset, covered)
                self._log_bytes = 0
            return None
        if message.type != streams.CHANGE:
            return None
        change = streams.read_change(message.body)
        if change is None:
            log.warning("unreadable change in the schedules log; skipped", offset=offset)
            return None
        own = self._own.get(message.message_id or "")
        verdict = self.state.apply(change, own[1] if own and own[0] == message.body else None)
        if verdict is None and self._on_change is not None:
            self._on_change(change.name)
        return verdict

    def _closed(self, *_: Any) -> None:
        if self.on_lost is not None:
            self.on_lost()

    async def close(self) -> None:
        """Stop following the log; what was read stays, for a ``start`` that catches up."""
        await self._stop_consuming()
        publishing, self._publishing = self._publishing, None
        if publishing is not None and not publishing.is_closed:
            with contextlib.suppress(*BROKER_TROUBLE):  # the connection may be gone
                await publishing.close()

    async def _stop_consuming(self) -> None:
        channel, self._consuming = self._consuming, None
        await self._acks.settle()
        if channel is not None and not channel.is_closed:
            channel.close_callbacks.discard(self._closed)
            with contextlib.suppress(*BROKER_TROUBLE):  # the connection may be gone
                await channel.close()
