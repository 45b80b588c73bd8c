"""A snapshot past ``PART_ENTRIES`` schedules is written in parts and read back whole, and a
reader that cannot find every part reads the whole log instead."""

from __future__ import annotations

import asyncio
from typing import Any

import aio_pika
import pytest

from tests.namespace import TestBroker
from tests.test_store_snapshot import state_of
from warren_cron.broker.connect import publish_channel
from warren_cron.client import Client
from warren_cron.errors import BROKER_CUT, StoreError
from warren_cron.history.stream import stream_arguments
from warren_cron.store import book, parts, snapshot
from warren_cron.store.book import StoreBook
from warren_cron.store.snapshot import (
    SnapshotIndex,
    decode_snapshot,
    decode_state,
    snapshot_bodies,
)
from warren_cron.store.state import StoreState
from warren_cron.store.streams import snapshot_store


def spec(name: str) -> dict[str, Any]:
    """A runtime schedule's fields, as an application sends them."""
    return {"name": name, "every": "1h", "task": "noop"}


async def test_a_snapshot_is_cut_into_parts_of_at_most_part_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """25 schedules at 10 a part: three parts, 10, 10 and 5, that hold every schedule."""
    monkeypatch.setattr(snapshot, "PART_ENTRIES", 10)
    state = state_of(25)
    bodies = await snapshot_bodies(state)
    read = [decode_state(body) for body in bodies]
    assert [len(part.entries) for part in read] == [10, 10, 5]
    assert {n for part in read for n in part.entries} == state.entries.keys()
    assert {part.offset for part in read} == {state.offset}


async def test_a_part_over_the_largest_message_is_halved_and_one_schedule_too_large_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A part whose compressed body passes ``MAX_SNAPSHOT_BYTES`` is split until each fits;
    a single schedule that cannot fit is refused by name."""
    state = state_of(40)
    [whole] = await snapshot_bodies(state)
    monkeypatch.setattr(snapshot, "MAX_SNAPSHOT_BYTES", len(whole) // 3)
    bodies = await snapshot_bodies(state)
    assert len(bodies) >= 3 and all(len(b) <= len(whole) // 3 for b in bodies)
    assert sum(len(decode_state(b).entries) for b in bodies) == 40
    monkeypatch.setattr(snapshot, "MAX_SNAPSHOT_BYTES", 10)
    with pytest.raises(StoreError, match="alone makes a snapshot"):
        await snapshot_bodies(state)


def test_an_index_reads_back_and_is_no_state() -> None:
    """The index the snapshot queue holds decodes to itself, and never passes for a state
    (a part that is an index is refused)."""
    index = SnapshotIndex(41, 7, ("a" * 32, "b" * 32))
    assert decode_snapshot(index.body()) == index
    with pytest.raises(StoreError, match="an index where a state was"):
        decode_state(index.body())


async def read_from_parts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """How many schedules new readers assemble from parts, and the offset, as they read
    them (the book goes on folding the log into the same state)."""
    assembled: list[tuple[int, int]] = []

    async def recorded(*args: Any) -> StoreState:
        state = await parts.read_parts(*args)
        assembled.append((len(state.entries), state.offset))
        return state

    monkeypatch.setattr(book, "read_parts", recorded)
    return assembled


@pytest.mark.broker
async def test_a_new_reader_reads_a_snapshot_in_parts_whole(
    broker: TestBroker, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """40 schedules, a snapshot from 25 on in parts of 10: the snapshot queue holds the index
    of its parts, and a new reader starts from them and has every schedule."""
    monkeypatch.setattr(snapshot, "PART_ENTRIES", 10)
    monkeypatch.setattr(book, "SNAPSHOT_EVERY", 25)
    await client.create_schedules([spec(f"k-{i}") for i in range(40)], by="app")
    index = await held_index(broker)
    # The writer whose change passes 25 writes it: a loaded machine has folded more by then.
    assert len(index.parts) >= 3 and index.offset >= 24
    assembled = await read_from_parts(monkeypatch)
    async with Client(broker.settings()) as reader:
        listed = await reader.list_schedules()
    assert [s.name for s in listed] == sorted(f"k-{i}" for i in range(40))
    [(count, offset)] = assembled
    assert count >= 25 and offset == index.offset and -(-count // 10) == len(index.parts)


async def held_index(broker: TestBroker) -> SnapshotIndex:
    """The index the namespace's snapshot queue holds."""
    channel = await publish_channel(broker.connection)
    try:
        body = await (await snapshot_store(channel, broker.names)).read()
    finally:
        await channel.close()
    assert body is not None
    index = decode_snapshot(body)
    assert isinstance(index, SnapshotIndex)
    return index


@pytest.mark.broker
async def test_parts_of_two_writers_at_once_and_a_forged_part_leave_the_index_readable(
    broker: TestBroker, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forged message in the parts stream, then two books writing their snapshot at the
    same time (their parts interleaved): the reader keeps only the parts its index names."""
    monkeypatch.setattr(snapshot, "PART_ENTRIES", 4)
    await client.create_schedules([spec(f"k-{i}") for i in range(30)], by="app")
    channel = await publish_channel(broker.connection)
    forged = aio_pika.Message(b"\x78\x9c forged part")
    await channel.declare_queue(  # as the writers declare it
        broker.names.store_snapshot_parts,
        durable=True,
        arguments=stream_arguments(parts.PARTS_MAX_BYTES),
    )
    await channel.default_exchange.publish(forged, broker.names.store_snapshot_parts)
    await channel.close()
    books = [StoreBook(broker.names), StoreBook(broker.names)]
    for each in books:
        await each.start(broker.connection)
    await asyncio.gather(*(each.write_snapshot() for each in books))
    assembled = await read_from_parts(monkeypatch)
    async with Client(broker.settings()) as reader:
        listed = await reader.list_schedules()
    for each in books:
        await each.close()
    assert [s.name for s in listed] == sorted(f"k-{i}" for i in range(30))
    assert [count for count, _ in assembled] == [30]


@pytest.mark.broker
async def test_parts_gone_from_their_stream_are_passed_over_for_the_whole_log(
    broker: TestBroker, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parts stream deleted under its index: a new reader says which parts are missing
    and folds the whole log instead, and has every schedule."""
    monkeypatch.setattr(snapshot, "PART_ENTRIES", 10)
    monkeypatch.setattr(book, "SNAPSHOT_EVERY", 25)
    await client.create_schedules([spec(f"k-{i}") for i in range(30)], by="app")
    await held_index(broker)
    channel = await broker.connection.channel()
    await channel.queue_delete(broker.names.store_snapshot_parts)
    await channel.close()
    with pytest.raises(StoreError, match="3 of the 3 parts"):
        await parts.read_parts(broker.connection, broker.names, await held_index(broker))
    async with Client(broker.settings()) as reader:
        listed = await reader.list_schedules()
    assert [s.name for s in listed] == sorted(f"k-{i}" for i in range(30))


@pytest.mark.broker
async def test_a_writer_cut_off_half_way_through_its_parts_leaves_the_last_snapshot_read(
    broker: TestBroker, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer whose connection dies after the first part of a new snapshot: no index names
    the parts it wrote (the snapshot queue keeps the last one), a new reader starts from the
    last snapshot and folds the log after it, and the next writer's snapshot is whole."""
    monkeypatch.setattr(snapshot, "PART_ENTRIES", 10)
    monkeypatch.setattr(book, "SNAPSHOT_EVERY", 1_000_000)
    await client.create_schedules([spec(f"k-{i}") for i in range(30)], by="app")
    connection = await aio_pika.connect(broker.url)
    writer = StoreBook(broker.names)
    await writer.start(connection)
    await writer.write_snapshot()
    last = await held_index(broker)
    await client.create_schedules([spec(f"k-{i}") for i in range(30, 45)], by="app")
    await writer.sync()
    cut_after_first_part(monkeypatch, broker.names.store_snapshot_parts, connection)
    with pytest.raises(BROKER_CUT):
        await writer.write_snapshot()
    assert await held_index(broker) == last
    assembled = await read_from_parts(monkeypatch)
    async with Client(broker.settings()) as reader:
        assert len(await reader.list_schedules()) == 45
    following = StoreBook(broker.names)
    await following.start(broker.connection)
    await following.write_snapshot()
    await following.close()
    later = await held_index(broker)
    assert later.offset > last.offset and len(later.parts) == 5
    async with Client(broker.settings()) as reader:
        assert len(await reader.list_schedules()) == 45
    assert [count for count, _ in assembled] == [30, 30, 45]


def cut_after_first_part(
    monkeypatch: pytest.MonkeyPatch, stream: str, connection: aio_pika.abc.AbstractConnection
) -> None:
    """Close ``connection`` once the first part published to ``stream`` is confirmed."""
    publish, sent = aio_pika.Exchange.publish, [0]

    async def cut(self: aio_pika.Exchange, message: Any, routing_key: str, **kw: Any) -> Any:
        if routing_key == stream and sent[0] == 1:
            await connection.close()
        sent[0] += routing_key == stream
        return await publish(self, message, routing_key, **kw)

    monkeypatch.setattr(aio_pika.Exchange, "publish", cut)
