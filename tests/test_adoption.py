"""Tasks published by hand, as the old runbook and the management UI do, get a retry plan."""

from __future__ import annotations

import asyncio
from typing import Any

import aio_pika
import pytest
from pamqp.header import ContentHeader

import warren_cron.worker.adopt
from tests.helpers import Recorder, envelope, publish_raw, registry
from tests.namespace import TestBroker
from warren_cron import codec
from warren_cron.worker.adopt import needs_plan

pytestmark = pytest.mark.broker


async def publish_to_main(broker: TestBroker, body: bytes) -> None:
    """``rabbitmqadmin publish exchange=amq.default routing_key=<main queue>``: no properties."""
    await broker.declare()
    channel = await broker.channel()
    await channel.default_exchange.publish(aio_pika.Message(body), broker.names.main_queue)
    await channel.close()


async def assert_runs_its_plan_then_fails(broker: TestBroker, recorder: Recorder, run_id: str):
    """Three attempts 0.1 s then 0.2 s apart (CRON_MAX_RETRIES=2), then one failure record."""
    await broker.wait_depth(broker.names.failed_queue, 1)
    [record] = await broker.get_all(broker.names.failed_queue)
    assert [ctx.attempt for _, ctx in recorder.calls] == [1, 2, 3]
    assert {ctx.run_id for _, ctx in recorder.calls} == {run_id}
    for gap, delay in zip(recorder.gaps(), (0.1, 0.2), strict=True):
        assert delay - 0.02 <= gap <= delay + 0.4, recorder.gaps()
    assert record.message_id == run_id
    assert record.headers["cron-reason"] == "retries-exhausted"
    assert record.headers["cron-attempts"] == 3
    broker.plan_keys.update({"100ms-200ms", "200ms"})


def test_only_keys_that_are_no_plan_need_one() -> None:
    """Plans and ``final`` route in the DLX; a queue name or any other key does not."""
    assert not needs_plan("100ms-200ms") and not needs_plan("final")
    assert needs_plan("cron_scheduler") and needs_plan("reports.nightly") and needs_plan("")


async def publish_other_key(broker: TestBroker, body: bytes) -> None:
    """The tasks exchange with a routing key that names no retry plan."""
    await publish_raw(broker, body, "reports.nightly")


@pytest.mark.parametrize("publish_by_hand", [publish_to_main, publish_other_key])
async def test_a_task_published_by_hand_retries_with_the_default_plan_under_its_run_id(
    broker: TestBroker, run_worker: Any, publish_by_hand: Any
) -> None:
    """The seed-recovery publish: attempted max_retries + 1 times, failed under its own id."""
    recorder = Recorder(failures=100)
    await run_worker(
        registry(job=recorder), max_retries=2, retry_delay_ms=100, retry_delay_multiplier=2
    )
    await publish_by_hand(broker, codec.encode(envelope("job", run_id="seed-recovery-1")))
    await assert_runs_its_plan_then_fails(broker, recorder, "seed-recovery-1")


async def test_an_adopted_task_that_succeeds_runs_once_and_leaves_nothing(
    broker: TestBroker, run_worker: Any
) -> None:
    """Adoption is one confirmed copy and one ack: the task runs once, nothing is left over."""
    recorder = Recorder()
    worker = await run_worker(registry(job=recorder), max_retries=2, retry_delay_ms=100)
    await publish_to_main(broker, codec.encode(envelope("job", run_id="once")))
    await recorder.wait_calls(1)
    await worker.join()
    assert [(ctx.run_id, ctx.attempt) for _, ctx in recorder.calls] == [("once", 1)]
    assert await broker.depth(broker.names.main_queue) == 0
    assert await broker.depth(broker.names.failed_queue) == 0
    broker.plan_keys.update({"100ms-200ms", "200ms"})


async def test_a_worker_gone_between_the_copy_and_the_ack_leaves_one_run_id_that_runs(
    broker: TestBroker, run_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker stops after the copy is confirmed and before the ack: the original goes back
    to the broker and is adopted again, so the task runs twice, both times under its own
    run id, and nothing is lost or left over."""
    confirmed = asyncio.Event()
    adopt = warren_cron.worker.adopt.Adopter.adopt

    async def adopt_then_hang(self: Any, message: Any, envelope: Any) -> Any:
        await adopt(self, message, envelope)
        monkeypatch.setattr(warren_cron.worker.adopt.Adopter, "adopt", adopt)
        confirmed.set()
        await asyncio.Event().wait()  # cancelled at shutdown: the original is never acked

    monkeypatch.setattr(warren_cron.worker.adopt.Adopter, "adopt", adopt_then_hang)
    first = await run_worker(
        registry(job=Recorder()),
        prefetch=1,
        max_retries=2,
        retry_delay_ms=100,
        shutdown_grace_seconds=0.1,
    )
    await publish_to_main(broker, codec.encode(envelope("job", run_id="twice-adopted")))
    await asyncio.wait_for(confirmed.wait(), 10)
    first.stop()
    await asyncio.wait_for(first.stopped.wait(), 10)
    recorder = Recorder()
    second = await run_worker(registry(job=recorder), max_retries=2, retry_delay_ms=100)
    await recorder.wait_calls(1)
    await second.join()
    assert {ctx.run_id for _, ctx in recorder.calls} == {"twice-adopted"}
    # Both copies run: the one confirmed before the stop, and the original adopted again,
    # whose attempt says it may be a repeat, as a redelivery would.
    assert sorted(ctx.redelivered for _, ctx in recorder.calls) == [False, True]
    assert await broker.depth(broker.names.main_queue) == 0
    assert await broker.depth(broker.names.failed_queue) == 0
    broker.plan_keys.update({"100ms-200ms", "200ms"})


class AdoptSpy:
    """Counts the copies the worker tries to publish (``Adopter.adopt`` calls)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        adopt = warren_cron.worker.adopt.Adopter.adopt

        async def counted(adopter: Any, message: Any, envelope: Any) -> Any:
            self.calls += 1
            return await adopt(adopter, message, envelope)

        monkeypatch.setattr(warren_cron.worker.adopt.Adopter, "adopt", counted)


async def only_failure_record(broker: TestBroker) -> Any:
    """The one record in the failed queue, once the main queue is left empty."""
    await broker.wait_depth(broker.names.failed_queue, 1)
    [record] = await broker.get_all(broker.names.failed_queue)
    assert await broker.depth(broker.names.main_queue) == 0
    return record


async def test_a_body_above_the_limit_published_by_hand_fails_at_once_and_is_never_copied(
    broker: TestBroker, run_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 12 MB body (CRON_MAX_BODY_BYTES is 1 MiB) goes straight to the failed queue as
    body-too-large: no copy of it is published first, the handler never runs. (RabbitMQ 4.x
    refuses a body above its max_message_size, 16 MiB, before any worker sees it.)"""
    spy, recorder = AdoptSpy(monkeypatch), Recorder()
    await run_worker(registry(job=recorder))
    body = codec.encode(envelope("job", {"blob": "x" * 12_000_000}, run_id="huge-by-hand"))
    await publish_to_main(broker, body)
    record = await only_failure_record(broker)
    assert record.headers["cron-reason"] == "body-too-large"
    assert "above CRON_MAX_BODY_BYTES (1048576)" in record.headers["cron-error"]
    # The record is of the original, as published (no plan was given to a copy).
    assert record.headers["cron-routing-key"] == broker.names.main_queue
    assert (spy.calls, recorder.calls, len(record.body)) == (0, [], len(body))


async def test_a_task_whose_copy_would_exceed_a_frame_fails_naming_the_size_and_the_limit(
    broker: TestBroker, run_worker: Any
) -> None:
    """Headers that fit the original but not the copy (run id, plan): nothing is published to
    the tasks (the broker would close the connection), the record says what happened and
    leaves the headers out, so that a replay fits; the worker goes on adopting."""
    recorder = Recorder()
    await run_worker(registry(job=recorder), max_retries=2, retry_delay_ms=100)
    body = codec.encode(envelope("job", run_id="big-headers-by-hand"))
    # With a message id of its own, none is stamped on the way: its size is known.
    shape = aio_pika.Message(body, headers={"trace": ""}, message_id="m")
    # 10 bytes short of one frame of the default frame_max (131072, less its 8 bytes).
    fill = 131_064 - len(ContentHeader(0, len(body), shape.properties).marshal()) - 10
    await broker.declare()
    channel = await broker.channel()
    big = aio_pika.Message(body, headers={"trace": "t" * fill}, message_id="m")
    await channel.default_exchange.publish(big, broker.names.main_queue)
    record = await only_failure_record(broker)
    error = record.headers["cron-error"]
    assert record.headers["cron-reason"] == "too-large-to-adopt"
    assert "would carry 131" in error and "above the 131064 one frame holds" in error
    assert "smaller headers" in error and "trace" not in record.headers
    assert (record.body, recorder.calls) == (body, [])
    await channel.default_exchange.publish(aio_pika.Message(body), broker.names.main_queue)
    await recorder.wait_calls(1)
    await channel.close()
    broker.plan_keys.update({"100ms-200ms", "200ms"})
