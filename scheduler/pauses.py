"""Paused schedules on the leader: the control stream followed from its first command.

A new leader consumes ``<ns>_control`` from the start and, to know when it has read all
there is, appends a marker of its own (a message with no event) and waits for it to come
back: every command before it is then applied, exactly, before the first fire, however long
the broker takes. Commands after it apply as they come, within moments, through restarts and
failover. A paused schedule's due fires are skipped with the reason ``paused``. A plain
resume leaves the fires skipped while paused alone (as Kubernetes' ``suspend``);
``resume --catch-up`` publishes them under the schedule's ``catch_up`` policy and misfire
grace, as if a leader had been away that long. After a plain resume no fire from before it
is owed, not even to a leader that was away through the pause (``resumed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from datetime import datetime
from typing import Any, Protocol

import aio_pika
import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage

from warren_cron.errors import BROKER_TROUBLE
from warren_cron.history.events import Event, decode, encode
from warren_cron.history.reader import consuming, stream_offset
from warren_cron.history.stream import declare_control
from warren_cron.names import Names
from warren_cron.scheduler.firing import Batch, Skipped, due_fires, keep
from warren_cron.scheduler.publisher import Fire
from warren_cron.schedules.control import Pause, fold_pauses
from warren_cron.schedules.schedule import Schedule

log = structlog.get_logger("scheduler")
#: The reason of a fire not published because its schedule is paused.
PAUSED = "paused"
#: Commands are few; streams deliver only to consumers with a prefetch.
PREFETCH = 100
#: The marker not back by then: the broker is in trouble; lead again from the start.
CATCH_UP_SECONDS = 60.0


class Named(Protocol):
    """The schedules a resume's catch-up looks up by name (the fire heap, a file's set)."""

    def get(self, name: str) -> Schedule | None:
        """The schedule called ``name``, if any."""


class PauseBook:
    """Which schedules are paused, kept current from the control stream while leading."""

    def __init__(self, names: Names, wake: asyncio.Event, lost: asyncio.Event) -> None:
        self._names = names
        self._wake = wake
        self._lost = lost
        self.paused: dict[str, Pause] = {}
        #: Per paused schedule: every fire after this was skipped because of the pause.
        self._held_from: dict[str, datetime] = {}
        self._catch_up: list[tuple[str, datetime]] = []
        #: Per schedule, its last plain resume: no fire before it is owed (a leader that was
        #: away through the pause and the resume must not catch up the fires it skipped).
        self.resumed: dict[str, datetime] = {}
        #: The moment up to which the last wake-up took due fires.
        self._popped_up_to: datetime | None = None
        self._channel: AbstractChannel | None = None
        self._connection: AbstractConnection | None = None
        self._marker = f"leader-{uuid.uuid4().hex}"
        #: Done once the marker came back: from then on commands are new, and logged.
        self._caught_up: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def start(self, connection: AbstractConnection) -> None:
        """Follow the control stream on a channel of its own; returns once every command it
        held is applied."""
        self._connection = connection
        await declare_control(connection, self._names)
        channel, _ = await consuming(connection, self._follow)
        channel.close_callbacks.add(self._on_close)
        self._channel = channel
        await self._read_to_end(channel)
        if self.paused:
            log.info("paused schedules", schedules=sorted(self.paused))

    async def _follow(self, channel: AbstractChannel) -> None:
        """Consume the control stream from its first command."""
        await channel.set_qos(prefetch_count=PREFETCH)
        queue = await channel.get_queue(self._names.control_stream, ensure=False)
        await queue.consume(self._on_message, arguments={"x-stream-offset": "first"})

    async def _read_to_end(self, channel: AbstractChannel) -> None:
        marker = aio_pika.Message(encode([]), message_id=self._marker)
        await channel.default_exchange.publish(marker, self._names.control_stream)
        try:
            await asyncio.wait_for(self._caught_up, CATCH_UP_SECONDS)
        except TimeoutError:
            raise TimeoutError(
                f"the control stream did not deliver its end within {CATCH_UP_SECONDS:g} s"
            ) from None

    async def close(self) -> None:
        """Stop following the stream."""
        channel, self._channel = self._channel, None
        if channel is not None and not channel.is_closed:
            channel.close_callbacks.discard(self._on_close)
            with contextlib.suppress(*BROKER_TROUBLE):  # the connection may be gone
                await channel.close()

    def shape(self, batch: Batch, now: datetime, handled: datetime, schedules: Named) -> None:
        """Skip the fires of paused schedules; add those a ``resume --catch-up`` brings back
        (up to ``handled``: every fire up to it was handled before this wake-up)."""
        if self._catch_up:
            self._add_catch_up(batch, now, handled, schedules)
        self._popped_up_to = now
        if not self.paused or not batch.publish:
            return
        publish: list[Fire] = []
        held: list[Skipped] = []
        for fire, schedule in batch.publish:
            if schedule.name in self.paused:
                held.append(Skipped(schedule, fire, PAUSED))
            else:
                publish.append((fire, schedule))
        batch.publish = publish
        batch.skipped += held

    def _add_catch_up(
        self, batch: Batch, now: datetime, handled: datetime, schedules: Named
    ) -> None:
        for name, held_from in self._catch_up:
            schedule = schedules.get(name)
            first = schedule.next_fire(held_from) if schedule is not None else None
            if schedule is None or first is None:
                continue
            fires, _, _ = due_fires(schedule, first, handled)
            kept = keep(schedule, fires, now)
            batch.publish += [(fire, schedule) for fire in kept]
            log.info("catching up fires skipped while paused", schedule=name, fires=len(kept))
        self._catch_up.clear()
        batch.publish.sort(key=lambda item: (item[0], item[1].name))

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        if message.message_id == self._marker and not self._caught_up.done():
            self._caught_up.set_result(None)
        for event in decode(message.body, stream_offset(message)):
            self._apply(event)
        await message.ack()

    def _apply(self, event: Event) -> None:
        name = event.schedule
        if name is None or event.type not in ("paused", "resumed"):
            return
        was = self.paused.get(name)
        self.paused = fold_pauses([event], self.paused)
        live = self._caught_up.done()  # before: a command an earlier leader applied
        if event.type == "paused" and was is None:
            # Every fire after the last wake-up is taken after this moment, and skipped.
            self._held_from[name] = self._popped_up_to or event.at
        elif event.type == "resumed" and was is not None:
            held_from = self._held_from.pop(name, was.since)
            self._resumed(name, event)
            if event.get("catch_up") and live:
                self._catch_up.append((name, held_from))
                self._wake.set()
        else:
            return  # the state did not change
        if live:
            self._wake.set()  # the fire loop tells its next fire again: a paused one has none
            log.info(f"schedule {event.type}", schedule=name, **_fields(event))

    def _resumed(self, name: str, event: Event) -> None:
        if event.get("catch_up"):
            self.resumed.pop(name, None)  # the skipped fires are wanted
        else:
            self.resumed[name] = event.at

    def _on_close(self, *_: Any) -> None:
        # Without the live stream a pause would go unnoticed: give up leading, and the next
        # session reads the stream again.
        if self._connection is not None and not self._connection.is_closed:
            log.warning("the control stream consumer stopped; leading again from the start")
        self._lost.set()


def _fields(event: Event) -> dict[str, Any]:
    keys = ("by", "reason", "catch_up")
    return {key: event.get(key) for key in keys if event.get(key) is not None}
