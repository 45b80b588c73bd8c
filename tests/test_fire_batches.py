"""Fires go out in batches: the same messages as one publish each, each confirmed on its own."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pamqp.frame
import pytest
from aio_pika.abc import AbstractChannel
from aio_pika.exceptions import DeliveryError, PublishError
from aiormq.exceptions import AMQPError, ChannelNotFoundEntity
from pamqp import commands as spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader
from structlog.testing import capture_logs

import warren_cron.broker.batch
import warren_cron.scheduler.publisher
from tests.namespace import TestBroker
from tests.scheduling import published, scheduler_settings, wait_published, write_schedules
from warren_cron import codec
from warren_cron.broker.batch import encode, publish_batch
from warren_cron.codec import Outgoing
from warren_cron.declare import queue_arguments
from warren_cron.envelope import Envelope
from warren_cron.scheduler.service import Scheduler
from warren_cron.schedules.load import load_schedules
from warren_cron.schedules.timing import CronTiming, cron_timing

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def outgoing(envelope: Envelope, exchange: str, key: str) -> Outgoing:
    """A batch message carrying an envelope, as the scheduler builds one."""
    assert envelope.schedule is not None
    body = codec.encode(envelope)
    return codec.fire_outgoing(exchange, key, body, envelope.run_id, envelope.schedule)


def test_batch_frames_are_byte_for_byte_those_of_a_single_publish() -> None:
    """encode() writes what pamqp writes for the codec's message, a body split over frames
    included."""
    envelope = Envelope(
        task="report", payload={"text": "é" * 300}, run_id="nightly@x", schedule="nightly",
        scheduled_for=T0,
    )  # fmt: skip
    body = codec.encode(envelope)
    frames: list[Any] = [
        spec.Basic.Publish(exchange="ns_tasks", routing_key="1s-2s", mandatory=True),
        ContentHeader(properties=codec.task_message(envelope).properties, body_size=len(body)),
        ContentBody(body[:500]),
        ContentBody(body[500:]),
    ]
    expected = b"".join(pamqp.frame.marshal(frame, 7) for frame in frames)
    assert encode(outgoing(envelope, "ns_tasks", "1s-2s"), 7, 500) == expected


def test_schedules_sharing_a_cron_expression_share_one_timing_and_its_answers() -> None:
    """One parse per expression and zone; questions asked in turn still get their own answer."""
    shared = cron_timing("0 */6 * * *", "UTC")
    assert cron_timing("0 */6 * * *", "UTC") is shared
    assert cron_timing("0 */6 * * *", "Europe/Berlin") is not shared
    answers = [shared.next_after(T0), shared.next_after(T0 + timedelta(hours=7))]
    answers.append(shared.next_after(T0))
    assert answers == [T0 + timedelta(hours=6), T0 + timedelta(hours=12), T0 + timedelta(hours=6)]


@pytest.mark.parametrize("zone", ["UTC", "Europe/Berlin", "America/New_York"])
@pytest.mark.parametrize(
    "expression", ["30 2 * * *", "0 */6 * * *", "*/20 * * * *", "15 1 * * 0", "0 0 29 2 *"]
)
def test_a_shared_timing_answers_as_a_fresh_one_across_dst(expression: str, zone: str) -> None:
    """Questions from many schedules (each owed from its own moment, as when a partition is
    taken over) get the answer a timing asked once gives, across DST changes too."""
    shared = cron_timing(expression, zone)
    randomly = random.Random(f"{expression} {zone}")  # noqa: S311 - a repeatable sample
    starts = (datetime(2024, 3, 9, tzinfo=UTC), datetime(2024, 10, 26, tzinfo=UTC))
    moments = sorted(
        start + timedelta(seconds=randomly.uniform(0, 4 * 86_400))
        for start in starts
        for _ in range(60)
    )
    moments += moments[::7]  # and some asked again, earlier than the last question
    for moment in moments:
        answer = shared.next_after(moment)
        assert answer == CronTiming(expression, zone).next_after(moment)
        if answer is not None:  # the fire loop asks next at the fire it got
            assert shared.next_after(answer) == CronTiming(expression, zone).next_after(answer)


def envelopes(count: int, prefix: str = "e") -> list[Envelope]:
    """``count`` distinct envelopes."""
    return [
        Envelope(task="noop", run_id=f"{prefix}{i}", schedule="s", scheduled_for=T0)
        for i in range(count)
    ]


@pytest.mark.broker
async def test_every_message_of_a_batch_is_confirmed_and_arrives_as_sent(
    broker: TestBroker, confirming: AbstractChannel
) -> None:
    """600 messages in batches of 200 are confirmed and arrive with body, id and headers."""
    topology = await broker.declare()
    sent = envelopes(600)
    exchange = broker.names.tasks_exchange
    batches = [
        await publish_batch(confirming, [outgoing(e, exchange, "1s") for e in sent[i : i + 200]])
        for i in range(0, 600, 200)
    ]
    deadline = asyncio.get_running_loop().time() + 30
    outcomes = [o for batch in batches for o in await batch.confirmed(deadline)]
    assert outcomes == [None] * 600
    messages = await broker.get_all(topology.main.name)
    assert [m.body for m in messages] == [codec.encode(e) for e in sent]
    assert all(m.message_id == e.run_id for m, e in zip(messages, sent, strict=True))
    pairs = list(zip(messages, sent, strict=True))
    assert all(m.headers == codec.task_message(e).headers for m, e in pairs)
    assert {(m.delivery_mode, m.content_type, m.routing_key) for m in messages} == {
        (2, "application/json", "1s")
    }


@pytest.mark.broker
async def test_a_returned_or_nacked_message_fails_alone_and_the_others_are_confirmed(
    broker: TestBroker, confirming: AbstractChannel
) -> None:
    """Unroutable: PublishError; refused by a full queue: DeliveryError; the rest confirmed."""
    full = f"{broker.names.namespace}_full"
    # Test-only queue: reject-publish turns "full" into a nack the test can provoke.
    arguments = {**queue_arguments("classic", max_length=1), "x-overflow": "reject-publish"}
    await confirming.declare_queue(full, durable=True, arguments=arguments)
    try:
        first, second, lost, last = envelopes(4)
        batch = [
            outgoing(first, "", full),
            outgoing(second, "", full),
            outgoing(lost, "", f"{full}_nobody"),
            outgoing(last, "", full),
        ]
        sent = await publish_batch(confirming, batch)
        outcomes = await sent.confirmed(asyncio.get_running_loop().time() + 30)
    finally:
        await confirming.queue_delete(full)
    assert outcomes[0] is None
    assert isinstance(outcomes[1], DeliveryError) and isinstance(outcomes[3], DeliveryError)
    assert isinstance(outcomes[2], PublishError)


@pytest.mark.broker
async def test_pending_confirms_fail_when_the_channel_closes_not_at_the_deadline(
    broker: TestBroker, confirming: AbstractChannel
) -> None:
    """The broker closes the channel (unknown exchange): every message fails with its error."""
    exchange = f"{broker.names.namespace}_no_such_exchange"
    sent = await publish_batch(confirming, [outgoing(e, exchange, "k") for e in envelopes(3)])
    # Without close detection these would fail only at the deadline, as TimeoutErrors.
    outcomes = await sent.confirmed(asyncio.get_running_loop().time() + 20)
    assert all(isinstance(o, ChannelNotFoundEntity) for o in outcomes)


def burst(count: int, due: datetime) -> str:
    """``count`` schedules whose first fire is ``due``."""
    stamp = due.strftime("%Y-%m-%dT%H:%M:%SZ")
    return "\n".join(
        f'[[schedule]]\nname = "b{i}"\nevery = "1h"\nstart_at = {stamp}\ntask = "noop"\n'
        for i in range(count)
    )


@pytest.fixture
async def scheduler_run(broker: TestBroker) -> AsyncIterator[Any]:
    """Run a scheduler in-process on a schedules file until the test ends."""
    running: list[tuple[Scheduler, asyncio.Task[None]]] = []

    async def start(path: Path) -> Scheduler:
        settings = scheduler_settings(broker, path)
        instance = Scheduler(settings, load_schedules(path, settings))
        running.append((instance, asyncio.create_task(instance.run())))
        await asyncio.wait_for(instance.leading.wait(), 15)
        return instance

    yield start
    for instance, task in running:
        instance.stop()
        await asyncio.wait_for(task, 15)


@pytest.mark.broker
async def test_a_burst_of_schedules_due_together_is_published_once_each(
    broker: TestBroker, scheduler_run: Any, tmp_path: Path
) -> None:
    """1,200 schedules firing in the same second: each fire is in the main queue exactly once."""
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=3)
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, burst(1200, due))
    await scheduler_run(path)
    # Bounded by progress: on a loaded machine (load 9-12) the 1,200 took over 30 s in all.
    await wait_published(broker, 1200, timeout=30)
    run_ids = sorted(envelope.run_id for _, envelope in await published(broker))
    assert run_ids == sorted(f"b{i}@{due:%Y-%m-%dT%H:%M:%SZ}" for i in range(1200))


@pytest.mark.broker
async def test_a_fire_that_is_not_confirmed_is_published_again_and_lands_once(
    broker: TestBroker, scheduler_run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first batch fails: the fires are logged, sent again after a backoff, and kept once."""
    original = warren_cron.broker.batch.publish_batch
    calls = 0

    async def failing_once(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise AMQPError("the broker refused the batch")
        return await original(*args)

    monkeypatch.setattr(warren_cron.scheduler.publisher, "publish_batch", failing_once)
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, burst(3, due))
    with capture_logs() as logs:
        await scheduler_run(path)
        await wait_published(broker, 3)
    retried = [e for e in logs if e["event"] == "fire not confirmed; publishing again"]
    expected = [f"b{i}@{due:%Y-%m-%dT%H:%M:%SZ}" for i in range(3)]
    assert sorted(e["run_id"] for e in retried) == expected
    assert {e["attempt"] for e in retried} == {1}
    assert sorted(env.run_id for _, env in await published(broker)) == expected
