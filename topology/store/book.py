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
from warren_cron.history.reader import consuming, stream_offset
from warren_cron.names import Names
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store import streams
from warren_cron.store.changes import Change
from warren_cron.store.outbox import Outbox
from warren_cron.store.snapshot import read_snapshot, snapshot_body
from warren_cron.store.state import StoreState

log = structlog.get_logger("store")
#: Log messages past the newest snapshot before a writer takes the next one: at least
#: this many, a tenth of the schedules when there are more (a snapshot costs time in
#: proportion to them: one every 1,000 creates made a bulk create of 100,000 quadratic),
#: at most ``SNAPSHOT_MOST`` (what a new reader folds after the snapshot stays short).
SNAPSHOT_EVERY = 1000
SNAPSHOT_MOST = 5000
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
        self._on_lost = on_lost
        self._waiting: dict[str, asyncio.Future[Verdict]] = {}
        #: This book's changes on their way: the bytes written and the spec checked.
        self._own: dict[str, tuple[bytes, ScheduleSpec]] = {}
        self._outbox: Outbox | None = None
        #: The last message read and not acked yet, and the acks under way.
        self._unacked: AbstractIncomingMessage | None = None
        self._acks: set[asyncio.Task[None]] = set()
        self._arguments: dict[str, Any] = {}
        self._consuming: AbstractChannel | None = None
        self._publishing: AbstractChannel | None = None
        self._snapshots: LatestMessage | None = None
        #: A snapshot being written: the changes in flight with it write none of their own.
        self._writing: asyncio.Task[None] | None = None

    async def start(self, connection: AbstractConnection) -> None:
        """Read the newest snapshot, follow the log after it; returns once all is read."""
        await streams.declare_log(connection, self.names)
        self._publishing = await publish_channel(connection)
        self._outbox = Outbox(self._publishing, SYNC_SECONDS)
        self._snapshots = await streams.snapshot_store(
            self._publishing, self.names, self.queue_type
        )
        await self._read_snapshot()
        channel, _ = await consuming(connection, self._follow)
        channel.close_callbacks.add(self._closed)
        self._consuming = channel
        await self.sync()

    async def _follow(self, channel: AbstractChannel) -> None:
        """Consume the log after what is folded in already."""
        await channel.set_qos(prefetch_count=PREFETCH)
        after = self.state.offset
        self._arguments["x-stream-offset"] = after + 1 if after >= 0 else "first"
        # Declared (passively), so the robust channel consumes again after a reconnect.
        queue = await channel.declare_queue(self.names.store_log, passive=True)
        await queue.consume(self._on_message, arguments=self._arguments)

    async def _read_snapshot(self) -> None:
        assert self._snapshots is not None
        body = await self._snapshots.read()
        if body is None:
            return
        try:
            self.state = await read_snapshot(body)
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
        every = max(SNAPSHOT_EVERY, min(len(self.state.entries) // 10, SNAPSHOT_MOST))
        due = self.state.offset - self.state.snapshot_offset >= every
        if due and (self._writing is None or self._writing.done()):
            # Of many changes in flight together, the first past the mark writes it.
            self._writing = asyncio.ensure_future(self.write_snapshot())
            await asyncio.shield(self._writing)

    async def write_snapshot(self) -> None:
        """Write the state as the newest snapshot, and say so in the log."""
        assert self._snapshots is not None and self._publishing is not None
        offset, count = self.state.offset, len(self.state.entries)
        await self._snapshots.write(await snapshot_body(self.state))
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
        if offset > self.state.offset:
            verdict = self._fold(message, offset)
            self.state.offset = offset
            self._arguments["x-stream-offset"] = offset + 1
            waiting = self._waiting.get(message.message_id or "")
            if waiting is not None and not waiting.done():
                waiting.set_result(verdict)
        if self._unacked is None:
            asyncio.get_running_loop().call_soon(self._ack)
        self._unacked = message

    def _ack(self) -> None:
        # One ack (``multiple``) for every message read in this turn of the loop: a bulk
        # create reads hundreds at once, and an ack each was a write each.
        message, self._unacked = self._unacked, None
        if message is not None:
            task = asyncio.ensure_future(self._acked(message))
            self._acks.add(task)
            task.add_done_callback(self._acks.discard)

    async def _acked(self, message: AbstractIncomingMessage) -> None:
        with contextlib.suppress(*BROKER_TROUBLE):  # a closed channel: the credit is gone too
            await message.ack(multiple=True)

    def _fold(self, message: AbstractIncomingMessage, offset: int) -> Verdict:
        if message.type == streams.SNAPSHOT:
            covered = streams.read_note(message.body)
            if covered is not None:
                self.state.snapshot_offset = max(self.state.snapshot_offset, covered)
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
        if self._on_lost is not None:
            self._on_lost()

    async def close(self) -> None:
        """Stop following the log."""
        for channel in (self._consuming, self._publishing):
            if channel is not None and not channel.is_closed:
                channel.close_callbacks.discard(self._closed)
                with contextlib.suppress(*BROKER_TROUBLE):  # the connection may be gone
                    await channel.close()
        self._consuming = self._publishing = None
