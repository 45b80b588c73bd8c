"""Batched acks: one frame covers many, and never a delivery that is running or rejected."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import pytest

from tests.conftest import plan
from tests.helpers import envelope, publish, registry
from tests.namespace import TestBroker
from warren_cron.faultkit.waits import eventually
from warren_cron.worker.acks import Acks
from warren_cron.worker.context import TaskContext


class BrokerModel:
    """What the broker keeps of a channel: outstanding tags, and each one's settled fate.

    It fails like the broker does: an ack or reject of a tag that is not outstanding closes the
    channel (PRECONDITION_FAILED, unknown delivery tag).
    """

    def __init__(self, tags: range, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random(0)  # noqa: S311 - a reproducible order, not a secret
        self.is_closed = False
        self.outstanding = set(tags)
        self.fate: dict[int, str] = {}
        self.frames = 0
        self.running: set[int] = set()

    async def basic_ack(self, tag: int, multiple: bool = False, wait: bool = True) -> None:
        """Apply an ack frame once it is queued; the queue may make the caller wait first."""
        await self._maybe_wait()
        assert tag in self.outstanding, f"ack of unknown delivery tag {tag}"
        covered = {t for t in self.outstanding if t <= tag} if multiple else {tag}
        assert not covered & self.running, f"ack {tag} covers running {covered & self.running}"
        self._settle(covered, "acked")

    async def basic_reject(self, tag: int, requeue: bool = True, wait: bool = True) -> None:
        """Apply a reject frame."""
        await self._maybe_wait()
        assert tag in self.outstanding, f"reject of unknown delivery tag {tag}"
        self._settle({tag}, "rejected")

    def _settle(self, tags: set[int], fate: str) -> None:
        self.frames += 1
        self.outstanding -= tags
        self.fate.update(dict.fromkeys(tags, fate))

    async def _maybe_wait(self) -> None:
        if self.rng.random() < 0.3:  # aiormq's write queue holds ten frames
            await asyncio.sleep(0)


async def passes(count: int) -> None:
    """Let the event loop run ``count`` times (the ack sender runs in one of them)."""
    for _ in range(count):
        await asyncio.sleep(0)


async def settle_at_random(model: BrokerModel, acks: Acks, tag: int, rng: random.Random) -> str:
    """One attempt: registered at start, runs a random number of loop passes, then settles."""
    acks.delivered(tag)
    model.running.add(tag)
    for _ in range(rng.randrange(4)):
        await asyncio.sleep(0)
    model.running.discard(tag)
    if rng.random() < 0.2:
        await acks.reject(tag)
        return "rejected"
    acks.ack(tag)
    return "acked"


@pytest.mark.parametrize("seed", range(20))
async def test_batched_acks_settle_every_delivery_as_decided_and_cover_nothing_running(
    seed: int,
) -> None:
    """Random finish order, rejects and a slow writer: each tag gets exactly its own fate."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible order, not a secret
    tags = range(1, 301)
    model = BrokerModel(tags, rng)
    acks = Acks(model)  # type: ignore[arg-type]
    attempts = []
    for tag in tags:  # deliveries arrive in order, a few per loop pass
        attempts.append(asyncio.create_task(settle_at_random(model, acks, tag, rng)))
        if rng.random() < 0.3:
            await asyncio.sleep(0)
    decided = await asyncio.gather(*attempts)
    await passes(200)
    assert model.fate == dict(zip(tags, decided, strict=True))
    assert model.outstanding == set()


async def test_acks_of_one_loop_pass_go_out_as_one_frame() -> None:
    """100 tasks done in the same pass: one multiple ack; one still running splits the batch."""
    model = BrokerModel(range(1, 101))
    acks = Acks(model)  # type: ignore[arg-type]
    for tag in range(1, 101):
        acks.delivered(tag)
    for tag in (*range(1, 50), *range(51, 101)):
        acks.ack(tag)
    model.running.add(50)
    await passes(200)
    assert model.outstanding == {50}
    assert model.frames == 1 + 50  # 1-49 at once, then each above the running one
    model.running.discard(50)
    acks.ack(50)
    await passes(200)
    assert (model.outstanding, model.frames) == (set(), 52)


async def test_a_closed_channel_refuses_the_ack_at_once() -> None:
    """Acking on a channel that is gone raises, so the worker knows the task is not settled."""
    model = BrokerModel(range(1, 2))
    model.is_closed = True
    acks = Acks(model)  # type: ignore[arg-type]
    acks.delivered(1)
    with pytest.raises(Exception, match="closed"):
        acks.ack(1)


@pytest.mark.broker
async def test_out_of_order_finishes_and_retries_each_end_once_on_a_real_broker(
    broker: TestBroker, run_worker: Any
) -> None:
    """300 tasks finishing out of order, a fifth failing once: each succeeds exactly once."""
    successes: Counter[str] = Counter()

    async def jittery(payload: Any, ctx: TaskContext) -> None:
        await asyncio.sleep(random.random() / 50)  # noqa: S311 - jitter, not a secret
        if payload["fail"] and ctx.attempt == 1:
            raise RuntimeError("fails once")
        successes[ctx.run_id] += 1

    worker = await run_worker(registry(jittery=jittery), prefetch=50)
    envs = [envelope("jittery", {"fail": i % 5 == 0}) for i in range(300)]
    for env in envs:
        await publish(broker, env, plan(50))
    await eventually(lambda: len(successes) == len(envs), timeout=30)
    await worker.join()  # a doubled ack would close the channel: tasks would run again
    worker.stop()  # a delivery never acked goes back to the queue when the worker leaves
    await asyncio.wait_for(worker.stopped.wait(), 30)
    assert set(successes.values()) == {1}
    assert await broker.depth(broker.names.main_queue) == 0
    assert await broker.depth(broker.names.failed_queue) == 0
