"""The runtime schedules as one reader sees them: the newest snapshot, the log after it,
then every change as it comes.

The book follows the log on a channel of its own. To know it has read everything, it
appends a marker and waits for it to come back (``sync``). A change is written the same
way: appended with a publisher confirm, then read back, and the fold's verdict on it, the
same for every reader, is the answer: applied, or refused (a version conflict, a name
taken). Whichever writer's change brings the log ``SNAPSHOT_EVERY`` messages past the newest
snapshot writes the next one, so retention never drops a change no snapshot holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage

from warren_cron.broker.connect import publish_channel
from warren_cron.broker.latest import LatestMessage
from warren_cron.declare import QueueType
from warren_cron.errors import BROKER_TROUBLE, StoreError
from warren_cron.history.reader import stream_offset
from warren_cron.names import Names
from warren_cron.store import streams
from warren_cron.store.changes import Change
from warren_cron.store.snapshot import decode_snapshot, encode_snapshot
from warren_cron.store.state import StoreState

log = structlog.get_logger("store")
#: Log messages past the newest snapshot before a writer takes the next one.
SNAPSHOT_EVERY = 1000
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
        self._arguments: dict[str, Any] = {}
        self._consuming: AbstractChannel | None = None
        self._publishing: AbstractChannel | None = None
        self._snapshots: LatestMessage | None = None

    async def start(self, connection: AbstractConnection) -> None:
        """Read the newest snapshot, follow the log after it; returns once all is read."""
        await streams.declare_log(connection, self.names)
        self._publishing = await publish_channel(connection)
        self._snapshots = await streams.snapshot_store(
            self._publishing, self.names, self.queue_type
        )
        await self._read_snapshot()
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=PREFETCH)
        after = self.state.offset
        self._arguments["x-stream-offset"] = after + 1 if after >= 0 else "first"
        queue = await channel.get_queue(self.names.store_log, ensure=False)
        await queue.consume(self._on_message, arguments=self._arguments)
        channel.close_callbacks.add(self._closed)
        self._consuming = channel
        await self.sync()

    async def _read_snapshot(self) -> None:
        assert self._snapshots is not None
        body = await self._snapshots.read()
        if body is None:
            return
        try:
            self.state = decode_snapshot(body)
        except StoreError as error:
            log.warning("reading every change of the log instead", error=str(error))

    async def sync(self) -> None:
        """Return once every message the log held when called is folded in."""
        await self._round_trip(streams.marker(uuid.uuid4().hex))

    async def append(self, change: Change) -> None:
        """Write ``change`` and read it back; raises the fold's refusal, if any."""
        refused = await self._round_trip(streams.change_message(change))
        if refused is not None:
            raise refused
        if self.state.offset - self.state.snapshot_offset >= SNAPSHOT_EVERY:
            await self.write_snapshot()

    async def write_snapshot(self) -> None:
        """Write the state as the newest snapshot, and say so in the log."""
        assert self._snapshots is not None and self._publishing is not None
        offset = self.state.offset
        await self._snapshots.write(encode_snapshot(self.state))
        note = streams.snapshot_note(offset, uuid.uuid4().hex)
        await self._publishing.default_exchange.publish(note, self.names.store_log)
        log.info("schedules snapshot written", offset=offset, schedules=len(self.state.entries))

    async def _round_trip(self, message: Any) -> Verdict:
        assert self._publishing is not None, "start() first"
        back: asyncio.Future[Verdict] = asyncio.get_running_loop().create_future()
        self._waiting[message.message_id] = back
        try:
            await self._publishing.default_exchange.publish(
                message, self.names.store_log, mandatory=True
            )
            return await asyncio.wait_for(back, SYNC_SECONDS)
        except TimeoutError:
            raise StoreError(
                f"the schedules log did not give back a message within {SYNC_SECONDS:g} s; "
                "a change may or may not be applied: get the schedule to see"
            ) from None
        finally:
            self._waiting.pop(message.message_id, None)

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        offset = stream_offset(message)
        if offset > self.state.offset:
            verdict = self._fold(message, offset)
            self.state.offset = offset
            self._arguments["x-stream-offset"] = offset + 1
            waiting = self._waiting.get(message.message_id or "")
            if waiting is not None and not waiting.done():
                waiting.set_result(verdict)
        await message.ack()

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
        verdict = self.state.apply(change)
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
