"""The adapter over aiormq's internals: each name it relies on, and its use on a real channel.

These fail first when an aiormq release changes what ``topology/broker/underlay.py`` uses.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator
from importlib.metadata import version
from pathlib import Path
from typing import Any, cast

import aiormq
import pytest
from aio_pika.abc import AbstractChannel
from aio_pika.exceptions import PublishError
from aiormq.abc import DeliveredMessage
from pamqp.commands import Basic

from tests.namespace import TestBroker
from warren_cron.broker.batch import encode
from warren_cron.broker.underlay import (
    RELIED_ON,
    RawChannel,
    Reliance,
    consuming,
    max_body,
    underlay,
    write_confirmed,
)
from warren_cron.codec import Outgoing

ROOT = Path(__file__).resolve().parent.parent
ADAPTER = ROOT / "topology" / "broker" / "underlay.py"
#: What only the adapter may name: aiormq's concrete channel, its writer's frames, and the
#: way to the channel under aio-pika's. Elsewhere mypy then allows the documented API only.
ADAPTER_ONLY = ("aiormq.Channel", "ChannelFrame", "get_underlay_channel", '"_channel"')


def label(reliance: Reliance) -> str:
    """``Owner.name``, for test ids and messages."""
    return f"{reliance.owner.__name__}.{reliance.name}"


CALLABLES = [r for r in RELIED_ON if isinstance(r.shape, tuple)]
VALUES = [r for r in RELIED_ON if isinstance(r.shape, type)]
AIORMQ = f"aiormq {version('aiormq')}"


@pytest.mark.parametrize("reliance", CALLABLES, ids=label)
def test_each_relied_on_callable_keeps_its_parameters(reliance: Reliance) -> None:
    """An aiormq method or constructor the adapter relies on exists with the same parameters."""
    member = inspect.getattr_static(reliance.owner, reliance.name, None)
    assert member is not None, f"{label(reliance)} is gone in {AIORMQ}"
    assert tuple(inspect.signature(member).parameters) == reliance.shape, label(reliance)


@pytest.mark.broker
async def test_each_relied_on_value_has_its_type_on_an_open_channel(
    confirming: AbstractChannel,
) -> None:
    """Every aiormq attribute the adapter reads or writes is there, of the type it expects."""
    raw = await underlay(confirming)
    found = {label(r): getattr(raw, r.name, None) for r in VALUES}
    wrong = {name: type(value).__name__ for name, value in found.items()}
    for reliance in VALUES:
        shape = reliance.shape
        assert isinstance(shape, type)
        if isinstance(raw, reliance.owner) and isinstance(found[label(reliance)], shape):
            del wrong[label(reliance)]
    assert not wrong, f"{AIORMQ} changed: {wrong}"


def messages(queue: str, count: int) -> list[Outgoing]:
    """``count`` small messages to ``queue`` through the default exchange."""
    return [Outgoing("", queue, b'{"n": %d}' % i, f"m{i}", {"k": "v"}) for i in range(count)]


async def outcomes(raw: RawChannel, batch: list[Outgoing]) -> list[Any]:
    """Write ``batch`` through the adapter; each message's confirm frame or error."""
    data = b"".join(encode(m, raw.number, max_body(raw)) for m in batch)
    confirms = await write_confirmed(raw, data, [m.message_id for m in batch])
    await asyncio.wait(confirms.futures, timeout=10)
    results = [f.exception() or f.result() if f.done() else None for f in confirms.futures]
    confirms.forget()
    return results


@pytest.fixture
async def queue(broker: TestBroker) -> AsyncIterator[str]:
    """A queue of the test's own, deleted afterwards if the test did not."""
    name = f"{broker.names.namespace}_underlay"
    channel = await broker.channel()
    await channel.declare_queue(name)
    yield name
    await channel.queue_delete(name)
    await channel.close()


@pytest.mark.broker
async def test_a_batch_is_confirmed_or_returned_per_message_and_consumed_through_aiormq(
    broker: TestBroker, confirming: AbstractChannel, queue: str
) -> None:
    """Acks and a return resolve each message alone; a consumer sees the rest until a cancel."""
    raw = await underlay(confirming)
    batch = messages(queue, 3)
    batch.insert(1, Outgoing("", f"{queue}_nobody", b"{}", "lost", {}))
    results = await outcomes(raw, batch)
    assert isinstance(results[1], PublishError)
    assert all(isinstance(r, Basic.Ack) for r in results[:1] + results[2:]), results
    assert cast(aiormq.Channel, raw).message_id_delivery_tag == {}  # forgotten, not piling up
    arrived: asyncio.Queue[DeliveredMessage] = asyncio.Queue()
    cancelled = asyncio.Event()
    raw.on_consumer_cancel_callbacks.add(lambda _frame: cancelled.set())
    await raw.basic_consume(queue, arrived.put, no_ack=True, consumer_tag="underlay")
    got = [await asyncio.wait_for(arrived.get(), 10) for _ in range(3)]
    assert [m.header.properties.message_id for m in got] == ["m0", "m1", "m2"]
    assert consuming(raw, "underlay")
    await (await broker.channel()).queue_delete(queue)  # the broker cancels the consumer
    await asyncio.wait_for(cancelled.wait(), 10)
    assert not consuming(raw, "underlay")


@pytest.mark.broker
async def test_a_write_the_writer_refused_leaves_no_tag_behind(
    confirming: AbstractChannel, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch that never reached the writer takes its tags back: later confirms still match."""
    raw = await underlay(confirming)

    class Refusing:
        async def put(self, _frame: object) -> None:
            raise ConnectionError("the writer is gone")

    with monkeypatch.context() as patch:
        patch.setattr(raw, "write_queue", Refusing())
        with pytest.raises(ConnectionError):
            await outcomes(raw, messages(queue, 2))
    assert all(isinstance(r, Basic.Ack) for r in await outcomes(raw, messages(queue, 3)))


def test_no_module_but_the_adapter_reaches_under_aio_pika() -> None:
    """Outside the adapter no module names aiormq's concrete channel or asks for it."""
    sources = [p for d in ("topology", "worker", "scheduler", "scripts", "examples")
               for p in (ROOT / d).rglob("*.py") if p != ADAPTER]  # fmt: skip
    found = {
        (str(p.relative_to(ROOT)), name)
        for p in sources
        for name in ADAPTER_ONLY
        if name in p.read_text()
    }
    assert not found
