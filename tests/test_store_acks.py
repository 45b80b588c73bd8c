"""The store's reader acks the log in order, whatever its acks wait for."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

from aio_pika.abc import AbstractIncomingMessage

from warren_cron.faultkit.waits import eventually
from warren_cron.names import Names
from warren_cron.store.book import StoreBook


@dataclass
class Delivery:
    """A log message whose ack waits ``wait`` seconds before it is written (a full write
    queue), and records what the broker would see."""

    offset: int
    written: list[int]
    wait: float = 0.0
    type: str = "note"
    message_id: str = ""
    body: bytes = b""
    headers: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.headers["x-stream-offset"] = self.offset

    async def ack(self, multiple: bool = False) -> None:
        """Write the ack after the wait."""
        assert multiple
        await asyncio.sleep(self.wait)
        self.written.append(self.offset)


async def test_a_slow_ack_is_never_overtaken_by_a_later_one() -> None:
    """Acks of two turns of the loop, the first held up before it is written: the broker
    sees them in order (a later multiple ack first made the earlier one name a tag it no
    longer held, and it closed the channel and the leader's term with it)."""
    book = StoreBook(Names("acks"))
    written: list[int] = []
    for offset, wait in ((0, 0.2), (1, 0.2), (2, 0.2)):
        await book._on_message(cast(AbstractIncomingMessage, Delivery(offset, written, wait)))
    await asyncio.sleep(0.01)  # the turn ends: its one ack goes, and waits to be written
    for offset in (3, 4, 5):
        await book._on_message(cast(AbstractIncomingMessage, Delivery(offset, written)))
    await eventually(lambda: 5 in written, 5, what="the second turn's ack")
    assert written == sorted(written) and written[0] == 2


@dataclass
class Consuming:
    """The book's consuming channel: its close is recorded where its acks are."""

    written: list[Any]
    is_closed: bool = False
    close_callbacks: set[Any] = field(default_factory=set)

    async def close(self) -> None:
        """Close, as the broker sees it."""
        self.written.append("closed")
        self.is_closed = True


async def test_a_book_closing_writes_its_ack_under_way_before_the_close_and_none_after() -> None:
    """A book closed while an ack waits to be written: the ack goes before the channel's
    close, and a message read meanwhile is not acked after it (an ack after the close made
    the broker close the whole connection, with every channel on it)."""
    book = StoreBook(Names("acks"))
    written: list[Any] = []
    book._consuming = cast(Any, Consuming(written))
    await book._on_message(cast(AbstractIncomingMessage, Delivery(0, written, 0.2)))
    await asyncio.sleep(0.01)  # the turn ends: its ack goes, and waits to be written
    closing = asyncio.create_task(book.close())
    await book._on_message(cast(AbstractIncomingMessage, Delivery(1, written)))
    await closing
    await asyncio.sleep(0.01)  # a turn for an ack that should not be
    assert written == [0, "closed"]
