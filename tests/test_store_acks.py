"""The store's reader acks the log in order, whatever its acks wait for, and with one ack for
what it read within a short while: a follower of a bulk create wrote an ack for nearly every
change."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from aio_pika.abc import AbstractIncomingMessage

from warren_cron.faultkit.waits import eventually
from warren_cron.names import Names
from warren_cron.store import acks
from warren_cron.store.acks import TurnAcks
from warren_cron.store.book import StoreBook


@pytest.fixture(autouse=True)
def ack_each_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Acks at the end of each turn of the loop, unless a test waits longer: the order and
    the close are what the first tests look at."""
    monkeypatch.setattr(acks, "ACK_SECONDS", 0.0)


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


class Read:
    """A message of the log that records its acks."""

    def __init__(self, number: int, acked: list[tuple[int, bool]], done: asyncio.Event) -> None:
        self.number, self._acked, self._done = number, acked, done

    async def ack(self, multiple: bool = False) -> None:
        """Record the ack, as the broker would take it."""
        self._acked.append((self.number, multiple))
        self._done.set()


def read_all(
    turn: TurnAcks, numbers: range, acked: list[tuple[int, bool]], done: asyncio.Event
) -> None:
    """Read the messages ``numbers`` in one turn of the loop, their acks recorded."""
    for number in numbers:
        turn.read(cast(AbstractIncomingMessage, cast(Any, Read(number, acked, done))))


async def test_messages_read_over_a_few_turns_get_one_multiple_ack_after_a_short_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Messages read over several turns of the loop within ``ACK_SECONDS`` are acked
    together, once, by the last one's tag (an ack a turn was a write for nearly each)."""
    monkeypatch.setattr(acks, "ACK_SECONDS", 0.2)
    acked: list[tuple[int, bool]] = []
    done, turn = asyncio.Event(), TurnAcks()
    read_all(turn, range(1, 4), acked, done)
    for _ in range(3):
        await asyncio.sleep(0)
    read_all(turn, range(4, 6), acked, done)
    assert acked == []
    await asyncio.wait_for(done.wait(), 10)
    assert acked == [(5, True)]


async def test_a_quarter_of_the_prefetch_read_is_acked_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A fast read is not held for the while: ``ACK_EVERY`` messages are acked at the end of
    the turn, so the log's consumer never runs out of credit."""
    monkeypatch.setattr(acks, "ACK_SECONDS", 600.0)
    acked: list[tuple[int, bool]] = []
    done = asyncio.Event()
    read_all(TurnAcks(), range(1, acks.ACK_EVERY + 4), acked, done)
    await asyncio.wait_for(done.wait(), 10)
    assert acked == [(acks.ACK_EVERY + 3, True)]
