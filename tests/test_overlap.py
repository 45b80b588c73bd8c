"""Overlap policy: Forbid and Replace across worker processes, and locks that free themselves."""

from __future__ import annotations

import logging
from contextlib import suppress
from datetime import datetime
from typing import Any

import pytest
from aio_pika.abc import AbstractConnection
from aiormq.exceptions import ChannelLockedResource, ChannelNotFoundEntity
from structlog.testing import capture_logs

import warren_cron.worker.overlap
from tests.conftest import plan
from tests.helpers import Recorder, envelope, publish
from tests.namespace import TestBroker
from tests.scheduling import Process, Spawner, env_for
from warren_cron.faultkit.waits import eventually
from warren_cron.worker.registry import Registry

pytestmark = pytest.mark.broker


async def two_workers(broker: TestBroker, spawn: Spawner, **extra: str) -> list[Process]:
    """Two worker processes taking one task at a time, with the ``hold`` handler (and the
    ``extra`` environment)."""
    await broker.declare()  # the queues exist before either worker races to consume
    env = env_for(
        broker,
        CRON_HANDLER_MODULES="tests.overlap_handlers",
        CRON_PREFETCH="1",
        CRON_SHUTDOWN_GRACE_SECONDS="0.5",
        **extra,
    )
    workers = [await spawn(["-m", "warren_cron.worker"], env) for _ in range(2)]
    for process in workers:
        await process.wait_event("worker started")
    return workers


async def wait_attempt(workers: list[Process], run_id: str, timeout: float = 15) -> dict[str, Any]:
    """The attempt line one of the workers logged for ``run_id``."""

    def logged() -> dict[str, Any] | None:
        attempts = (e for p in workers for e in p.named("attempt") if e["run_id"] == run_id)
        return next(attempts, None)

    event = await eventually(logged, timeout, what=f"an attempt of {run_id}")
    assert event is not None
    return event


def who_logged(workers: list[Process], event: str, run_id: str) -> Process:
    """The worker that logged ``event`` for ``run_id``."""
    [found] = [w for w in workers if any(e["run_id"] == run_id for e in w.named(event))]
    return found


def run(concurrency: str, seconds: float, timeout: float = 10) -> Any:
    """One fire of the schedule ``report`` that holds its worker for ``seconds``."""
    return envelope(
        "hold",
        {"seconds": seconds},
        schedule="report",
        concurrency=concurrency,
        timeout_seconds=timeout,
    )


async def wait_lock_released(broker: TestBroker, schedule: str, timeout: float = 10) -> None:
    """Wait until no connection holds the schedule's lock queue (the broker deleted it)."""

    async def released() -> bool:
        channel = await broker.channel()
        try:
            await channel.declare_queue(broker.names.lock_queue(schedule), passive=True)
        except ChannelNotFoundEntity:
            return True
        except ChannelLockedResource:
            pass  # RESOURCE_LOCKED: still held
        with suppress(Exception):
            await channel.close()
        return False

    await eventually(released, timeout, what=f"lock of {schedule} released")


async def assert_nothing_left(broker: TestBroker) -> None:
    """No message waits anywhere: no retry was spent, nothing failed."""
    for queue in (
        broker.names.main_queue,
        broker.names.failed_queue,
        broker.names.retry_queue("1m"),
    ):
        assert await broker.depth(queue) == 0, queue


async def test_forbid_acks_a_second_run_as_lock_contended_on_another_worker(
    broker: TestBroker, spawn: Spawner
) -> None:
    """While one worker runs the schedule, the other skips its run: acked, no retry spent."""
    workers = await two_workers(broker, spawn)
    first, second = run("Forbid", 3), run("Forbid", 0)
    await publish(broker, first, plan(60_000))
    await wait_event_for(workers, "hold started", first.run_id)
    await publish(broker, second, plan(60_000))
    contended = await wait_attempt(workers, second.run_id)
    finished = await wait_attempt(workers, first.run_id)
    assert (contended["outcome"], finished["outcome"]) == ("lock-contended", "succeeded")
    holder = who_logged(workers, "hold started", first.run_id)
    assert holder is not who_logged(workers, "attempt", second.run_id)
    await assert_nothing_left(broker)


async def test_replace_cancels_the_running_attempt_on_another_worker_and_runs(
    broker: TestBroker, spawn: Spawner
) -> None:
    """The old run is acked as replaced, not retried; the new one runs once the lock is free."""
    workers = await two_workers(broker, spawn)
    old, new = run("Replace", 30), run("Replace", 0.1)
    await publish(broker, old, plan(60_000))
    await wait_event_for(workers, "hold started", old.run_id)
    await publish(broker, new, plan(60_000))
    replaced = await wait_attempt(workers, old.run_id)
    succeeded = await wait_attempt(workers, new.run_id)
    assert (replaced["outcome"], succeeded["outcome"]) == ("replaced", "succeeded")
    assert replaced["error"] == f"replaced by {new.run_id}"
    started_new = next(e for e in events(workers, "hold started") if e["run_id"] == new.run_id)
    assert stamp(started_new) >= stamp(replaced)
    await assert_nothing_left(broker)


async def test_a_crashed_holder_frees_the_lock(broker: TestBroker, spawn: Spawner) -> None:
    """SIGKILL the worker holding the lock: the redelivered run takes it on the other worker."""
    workers = await two_workers(broker, spawn)
    held = run("Forbid", 30)
    await publish(broker, held, plan(60_000))
    await wait_event_for(workers, "hold started", held.run_id)
    holder = who_logged(workers, "hold started", held.run_id)
    [other] = [w for w in workers if w is not holder]
    await holder.kill()
    await eventually(
        lambda: [e for e in other.named("hold started") if e["run_id"] == held.run_id], 15
    )
    assert [e for e in other.named("attempt") if e["run_id"] == held.run_id] == []


async def test_replace_falls_back_to_forbid_when_the_holder_does_not_let_go(
    broker: TestBroker, run_worker: Any
) -> None:
    """A holder deaf to cancels keeps the lock: after half its timeout the new run is skipped."""
    channel = await broker.channel()
    lock = broker.names.lock_queue("report")
    await channel.declare_queue(lock, exclusive=True)  # held by the test's connection
    recorder = Recorder()
    registry = Registry()
    registry.register("hold", recorder)
    await run_worker(registry)
    with capture_logs() as logs:
        await publish(broker, run("Replace", 0, timeout=0.6), plan(60_000))
        await eventually(lambda: any(e["event"] == "attempt" for e in logs))
    [attempt] = [e for e in logs if e["event"] == "attempt"]
    assert attempt["outcome"] == "lock-contended" and recorder.calls == []
    assert await broker.depth(lock) >= 1  # the cancel request reached the holder's queue


async def test_forbid_runs_one_after_another_once_the_lock_is_released(
    broker: TestBroker, run_worker: Any
) -> None:
    """A finished run gives the lock back: the next fire of the schedule runs normally."""
    recorder = Recorder()
    registry = Registry()
    registry.register("hold", recorder)
    worker = await run_worker(registry)
    for _ in range(2):
        await publish(broker, run("Forbid", 0), plan(60_000))
        await recorder.wait_calls(len(recorder.calls) + 1)
        # The handler was called; the lock goes back only once the attempt has ended.
        await wait_lock_released(broker, "report")
    await worker.join()
    assert len(recorder.calls) == 2
    await assert_nothing_left(broker)


async def test_an_attempt_that_loses_its_lock_stops_and_is_retried(
    broker: TestBroker, run_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without its lock a run could overlap the next one: it is cancelled and retried."""
    connections: list[AbstractConnection] = []
    original = warren_cron.worker.overlap._connect

    async def recorded(*args: Any) -> AbstractConnection:
        connections.append(await original(*args))
        return connections[-1]

    monkeypatch.setattr(warren_cron.worker.overlap, "_connect", recorded)
    recorder = Recorder(sleep=30)
    registry = Registry()
    registry.register("hold", recorder)
    await run_worker(registry)
    with capture_logs() as logs:
        await publish(broker, run("Forbid", 0), plan(60_000))
        await recorder.started.wait()
        await connections[0].close()
        await eventually(lambda: any(e["event"] == "attempt" for e in logs))
    [attempt] = [e for e in logs if e["event"] == "attempt"]
    assert (attempt["outcome"], attempt["reason"]) == ("retrying", "lock-lost")
    assert recorder.finished == 0
    await broker.wait_depth(broker.names.retry_queue("1m"), 1)


async def test_a_run_whose_own_lost_attempt_still_holds_the_lock_is_retried_not_skipped(
    broker: TestBroker, run_worker: Any
) -> None:
    """A lock left by a lost attempt of the same run (its node cut off, say) lingers until the
    broker notices: the run is retried, not skipped; another run is still skipped."""
    stale, other = run("Forbid", 0), run("Forbid", 0)
    channel = await broker.channel()  # the lost holder: the test's connection keeps its queues
    for name in (broker.names.lock_queue("report"), lock_holder(broker, stale.run_id)):
        await channel.declare_queue(name, exclusive=True)
    recorder = Recorder()
    registry = Registry()
    registry.register("hold", recorder)
    await run_worker(registry)
    with capture_logs() as logs:
        for envelope_ in (stale, other):
            await publish(broker, envelope_, plan(60_000))
        await eventually(lambda: len([e for e in logs if e["event"] == "attempt"]) == 2)
    outcomes = {e["run_id"]: (e["outcome"], e["reason"]) for e in logs if e["event"] == "attempt"}
    assert outcomes[stale.run_id] == ("retrying", "lock-held-by-lost-attempt")
    assert outcomes[other.run_id] == ("lock-contended", "lock-contended")
    assert recorder.calls == []
    await broker.wait_depth(broker.names.retry_queue("1m"), 1)


async def test_a_handed_out_run_that_meets_a_held_lock_is_retried_not_skipped(
    broker: TestBroker, run_worker: Any
) -> None:
    """The broker may drop a lost attempt's holder queue before its lock: a run handed out
    before (redelivered) that finds the lock held cannot tell, so it is retried, not skipped."""
    lost = run("Forbid", 0)
    holder = await broker.channel()  # the lock of a lost attempt whose holder queue is gone
    await holder.declare_queue(broker.names.lock_queue("report"), exclusive=True)
    await publish(broker, lost, plan(60_000))
    await hand_out_and_lose(broker)
    recorder = Recorder()
    registry = Registry()
    registry.register("hold", recorder)
    with capture_logs() as logs:
        await run_worker(registry)
        await eventually(lambda: [e for e in logs if e["event"] == "attempt"])
    [attempt] = [e for e in logs if e["event"] == "attempt"]
    assert (attempt["outcome"], attempt["reason"]) == ("retrying", "lock-held-by-lost-attempt")
    assert recorder.calls == []
    await broker.wait_depth(broker.names.retry_queue("1m"), 1)


async def hand_out_and_lose(broker: TestBroker) -> None:
    """Take the one task from the main queue unacked, then drop the channel: it is redelivered."""
    channel = await broker.channel()
    queue = await channel.get_queue(broker.names.main_queue)
    message = await eventually(lambda: queue.get(no_ack=False, fail=False))
    assert message is not None
    await channel.close()


def lock_holder(broker: TestBroker, run_id: str) -> str:
    """The queue naming ``run_id`` as the holder of the ``report`` schedule's lock."""
    return broker.names.lock_holder_queue("report", run_id)


def events(workers: list[Process], name: str) -> list[dict[str, Any]]:
    """Events of every worker with this name."""
    return [e for w in workers for e in w.named(name)]


async def wait_event_for(workers: list[Process], name: str, run_id: str) -> None:
    """Wait until some worker logged ``name`` for ``run_id``."""
    await eventually(lambda: [e for e in events(workers, name) if e.get("run_id") == run_id], 15)


def stamp(event: dict[str, Any]) -> datetime:
    """When an event was logged."""
    return datetime.fromisoformat(event["timestamp"])


async def test_a_forbid_schedules_attempts_log_no_warning(
    broker: TestBroker, run_worker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A Forbid run that takes its lock, runs and gives it back is the normal path: its worker
    logs no warning (none from the AMQP client about a cancelled call either)."""
    recorder = Recorder()
    registry = Registry()
    registry.register("hold", recorder)
    worker = await run_worker(registry)
    caplog.set_level(logging.WARNING)
    with capture_logs() as logs:
        for _ in range(3):
            await publish(broker, run("Forbid", 0), plan(60_000))
            # Each attempt opens a connection of its own for its lock: on a broker that CI's
            # other tests keep busy that took more than 10 s. A run refused its lock instead
            # would show as lock-contended below, not pass.
            await recorder.wait_calls(len(recorder.calls) + 1, timeout=60)
            await wait_lock_released(broker, "report", timeout=60)
        await worker.join()
        await eventually(lambda: len([e for e in logs if e["event"] == "attempt"]) == 3)
    assert [e["outcome"] for e in logs if e["event"] == "attempt"] == ["succeeded"] * 3
    assert [e for e in logs if e["log_level"] in ("warning", "error", "critical")] == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
