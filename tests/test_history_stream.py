"""The history stream: its retention, its publisher (bounded, batched) and reading it to the end."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractChannel, AbstractConnection
from aiormq.exceptions import ChannelPreconditionFailed, ConnectionInternalError

import warren_cron.broker.drops as drops_module
import warren_cron.history.follow as follow_module
import warren_cron.history.publisher as publisher_module
import warren_cron.history.reader as reader_module
from tests.namespace import TestBroker
from warren_cron.broker.connect import connect
from warren_cron.clock import utcnow
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.waits import eventually
from warren_cron.history.events import Event, decode, encode, event
from warren_cron.history.follow import StreamFollower
from warren_cron.history.losses import Losses
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.history.reader import End, read_stream
from warren_cron.history.stream import SEGMENT_BYTES, declare_history
from warren_cron.names import Names
from warren_cron.runtime.settings import CronSettings

#: Drops in a row before the read opens: more than a fixed count of tries would outlast.
DROPS = 4


def test_a_full_buffer_drops_and_counts_instead_of_growing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the stream unable to take events, memory stays bounded and each drop is counted."""
    monkeypatch.setattr(publisher_module, "CAPACITY", 10)
    history = HistoryPublisher(Names("x"), CronSettings(), "test", metrics=False)
    for n in range(15):
        history.emit(event("attempt", run_id=f"r{n}"))
    assert (history.dropped, history.published) == (5, 0)


def test_a_loss_is_reported_once_and_a_report_the_stream_refused_comes_again() -> None:
    """A report takes every loss so far; one handed back is merged into the next, which
    tells of both, from the first drop on."""
    losses = Losses("worker")
    losses.add(3)
    refused = losses.take()
    assert refused is not None and losses.take() is None
    losses.add(2)
    losses.keep(refused)
    report = losses.take()
    assert report is not None
    [read] = decode(report.body, 0)
    assert (read.type, read.run_id, read.get("count"), read.get("process")) == (
        "dropped",
        None,
        5,
        "worker",
    )
    assert read.get("since") == refused.since and read.get("until") >= refused.until


def test_an_event_type_this_reader_does_not_know_is_left_out() -> None:
    """A newer writer's type is skipped, as readers older than ``dropped`` skip that one."""
    body = encode([event("fired", run_id="a@1"), {**event("fired"), "type": "from-the-future"}])
    assert [(e.type, e.run_id) for e in decode(body, 0)] == [("fired", "a@1")]


@pytest.mark.broker
async def test_many_events_arrive_in_order_in_few_messages(broker: TestBroker) -> None:
    """A burst of 1,200 events is read back whole and in order, a few stream messages holding
    them."""
    history = HistoryPublisher(broker.names, CronSettings(), "test", metrics=False)
    await history.start(broker.connection)
    for n in range(1200):
        history.emit(event("attempt", run_id=f"r{n}", attempt=1, outcome="succeeded"))
    await history.close()
    events = [e async for e in read_stream(broker.connection, broker.names.history_stream)]
    assert [e.run_id for e in events] == [f"r{n}" for n in range(1200)]
    assert history.published == 1200
    assert len({e.offset for e in events}) <= 12


@pytest.mark.broker
async def test_reading_skips_what_is_no_event_and_starts_where_asked(broker: TestBroker) -> None:
    """Foreign bodies in the stream are skipped; a start after the last event reads nothing."""
    await declare_history(broker.connection, broker.names, CronSettings())
    channel = await broker.channel()
    stream = broker.names.history_stream
    for body in (b"not json", b'{"v": 99, "type": "attempt"}', b'[{"v": 1}]'):
        await channel.default_exchange.publish(aio_pika.Message(body), stream)
    history = HistoryPublisher(broker.names, CronSettings(), "test", metrics=False)
    await history.start(broker.connection)
    history.emit(event("fired", run_id="nightly@x", schedule="nightly"))
    await history.close()
    everything = [e async for e in read_stream(broker.connection, stream)]
    assert [(e.type, e.run_id, e.offset) for e in everything] == [("fired", "nightly@x", 3)]
    later = utcnow() + timedelta(minutes=1)
    assert [e async for e in read_stream(broker.connection, stream, later)] == []
    assert [e async for e in read_stream(broker.connection, stream, 4)] == []


async def refusal(broker: TestBroker, stream: str, arguments: dict[str, Any]) -> str | None:
    """Why the broker refuses to declare ``stream`` (which exists) with ``arguments``: it
    answers PRECONDITION_FAILED for any other than those it holds; None when it accepts."""
    channel = await broker.connection.channel()
    await channel.declare_queue(stream, passive=True)  # never created here
    try:
        await channel.declare_queue(stream, durable=True, arguments=arguments)
    except ChannelPreconditionFailed as refused:
        return str(refused)
    await channel.close()
    return None


@pytest.mark.broker
async def test_the_history_stream_is_declared_with_the_retention_of_the_settings(
    broker: TestBroker, run_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker declares the history stream as a stream, with ``x-max-age`` from
    CRON_HISTORY_MAX_AGE and ``x-max-length-bytes`` from CRON_HISTORY_MAX_BYTES: the broker
    takes those arguments again and refuses any other, naming it."""
    monkeypatch.setenv("CRON_HISTORY_MAX_AGE", "2h")
    monkeypatch.setenv("CRON_HISTORY_MAX_BYTES", "123456789")
    await run_worker()
    stream = broker.names.history_stream
    held = {
        "x-queue-type": "stream",
        "x-max-age": "7200s",
        "x-max-length-bytes": 123_456_789,
        "x-stream-max-segment-size-bytes": SEGMENT_BYTES,
    }
    assert await refusal(broker, stream, held) is None
    others = {"x-queue-type": "classic", "x-max-age": "7201s", "x-max-length-bytes": 123_456_790}
    for key, other in others.items():
        refused = await refusal(broker, stream, {**held, key: other})
        assert refused is not None and f"inequivalent arg '{key}'" in refused, (key, refused)


def connection_pid(node: PrivateBroker, name: str) -> str:
    """The broker's pid of the connection named ``name``."""
    listing = node.ctl("list_connections", "pid", "client_properties", "--no-table-headers")
    [line] = [line for line in listing.splitlines() if name in line]
    return line.split()[0]


async def read_through(connection: AbstractConnection, stream: str, way: str) -> list[Event]:
    """Every event of ``stream``, by a one-off read or a live follower caught up."""
    if way == "read":
        return [e async for e in read_stream(connection, stream)]
    seen: list[Event] = []
    follower = StreamFollower(stream, lambda events, _offset: seen.extend(events))
    await follower.start(connection)
    await eventually(lambda: follower.caught_up, 10, what="caught up")
    await follower.stop()
    return seen


@pytest.mark.broker
@pytest.mark.parametrize("node", ["private"])
@pytest.mark.parametrize("way", ["read", "follow"])
async def test_a_read_whose_connection_drops_as_it_opens_tries_again(
    broker: TestBroker, private_broker: PrivateBroker, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """The broker closing a read's or a follower's connection as it opens (RabbitMQ does, for
    a consumer that comes before the stream's member has started: just after its
    declaration on 3.10, after a restart on 4.3, as long as the member takes to start)
    costs new tries once the connection is back, not the read."""
    history = HistoryPublisher(broker.names, CronSettings(), "test", metrics=False)
    await history.start(broker.connection)
    for n in range(3):
        history.emit(event("attempt", run_id=f"r{n}", attempt=1, outcome="succeeded"))
    await history.close()
    name = f"reader-{uuid.uuid4().hex}"
    connection = await connect(broker.settings(), name, log_outages=False)
    down = asyncio.Event()
    connection.close_callbacks.add(lambda *_: down.set())
    opened, drops = reader_module.last_offset, [DROPS]

    async def dropped_first(channel: AbstractChannel, stream: str) -> End | None:
        if drops[0]:
            drops[0] -= 1
            down.clear()
            pid = await asyncio.to_thread(connection_pid, private_broker, name)
            await asyncio.to_thread(private_broker.ctl, "close_connection", pid, "test")
            await asyncio.wait_for(down.wait(), 10)
            # What the consume in flight when the broker closed the connection raised.
            raise ConnectionInternalError("INTERNAL_ERROR")
        return await opened(channel, stream)

    monkeypatch.setattr(reader_module, "last_offset", dropped_first)
    # Each drop here takes two rabbitmqctl runs, slow on a loaded machine: the time the
    # retries are allowed is not the point (tests/test_drops.py has it).
    monkeypatch.setattr(drops_module, "RECOVERY_SECONDS", 300.0)
    monkeypatch.setattr(follow_module, "last_offset", dropped_first)
    try:
        events = await read_through(connection, broker.names.history_stream, way)
    finally:
        await connection.close()
    assert not drops[0] and [e.run_id for e in events] == ["r0", "r1", "r2"]
