"""Long attempts on the private node, whose consumer_timeout is 4 s: they run far past it,
are handed over when their worker is killed, survive a broker restart, and a hung one is
retried (docs/long-jobs.md). The workers are ``tests/long_worker.py`` processes."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.faults.harness import FaultScenario
from tests.long_worker import READY
from warren_cron.broker.exclusive import exists
from warren_cron.cancel.stream import store
from warren_cron.cancel.tombstone import Tombstone
from warren_cron.clock import utcnow
from warren_cron.declare import QueueType
from warren_cron.envelope import Envelope
from warren_cron.faultkit.processes import Proc
from warren_cron.faultkit.waits import eventually, progressing
from warren_cron.worker.parking import claim_queue, lease_queue

pytestmark = pytest.mark.faults
#: The lease of the tests' workers: a run is handed over within 1.5 of them.
LEASE = 4.0
#: The broker's consumer_timeout on the private node.
CONSUMER_TIMEOUT = 4.0


def long_envelope(task: str, **payload: Any) -> Envelope:
    """A task asking for a timeout far above the consumer timeout."""
    run_id = f"{task}-{time.time_ns()}"
    return Envelope(
        task=task, payload=payload, run_id=run_id, scheduled_for=utcnow(), timeout_seconds=600
    )


def lines(path: Path) -> list[dict[str, Any]]:
    """The ledger's lines so far."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def events(path: Path, run_id: str, kind: str) -> list[dict[str, Any]]:
    """The ledger's lines of one kind for one run."""
    return [line for line in lines(path) if line["run"] == run_id and line["event"] == kind]


def run_span(path: Path, run_id: str, kind: str) -> float:
    """When the run's one line of ``kind`` was written."""
    [line] = events(path, run_id, kind)
    return float(line["t"])


async def long_worker(scenario: FaultScenario, ledger: Path, **extra: str) -> Proc:
    """A long worker on the scenario's namespace, consuming."""
    env = {
        **scenario.worker_env(),
        "LONG_LEDGER": str(ledger),
        "CRON_LONG_LEASE_SECONDS": str(LEASE),
        **extra,
    }
    return await scenario.procs.spawn(["-m", "tests.long_worker"], READY, **env).ready()


async def running(scenario: FaultScenario, ledger: Path) -> tuple[Proc, Envelope]:
    """A long worker running a 6 s long attempt, once its handler heartbeat once."""
    await scenario.prepare()
    worker = await long_worker(scenario, ledger)
    envelope = long_envelope("long_sleep", seconds=6, beat=0.5)
    await scenario.publish([(envelope, "long")])
    await eventually(lambda: events(ledger, envelope.run_id, "beat"), 20)
    return worker, envelope


def progress_events(proc: Proc, run_id: str) -> list[dict[str, Any]]:
    """The history ``progress`` events ``proc`` wrote for ``run_id``."""
    found = [json.loads(line) for line in proc.log().splitlines() if line.startswith('{"history"')]
    return [e["history"] for e in found if e["history"]["run_id"] == run_id]


async def settled(proc: Proc, ledger: Path, run_id: str, stall: float = 30) -> None:
    """Wait until ``proc`` settled ``run_id`` as succeeded, as long as the run's ledger lines
    keep coming: bounded by progress, since a loaded machine starts and runs it later."""
    said = f'"settled", "run": "{run_id}", "reason": "succeeded"'

    def seen() -> tuple[int, int]:
        return len([line for line in lines(ledger) if line["run"] == run_id]), proc.count(said)

    await progressing(seen, lambda now: now[1] > 0, stall, what=said, interval=0.2)


async def test_an_attempt_runs_twenty_consumer_timeouts_and_succeeds_once(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """An 80 s attempt (twenty times the broker's consumer_timeout) heartbeats all along,
    succeeds once on one worker, and leaves no lease or claim behind. On quorum queues, which
    enforce the consumer timeout on every release (4.3's classic queues do not)."""
    ledger = tmp_path / "long.jsonl"
    scenario.broker.queue_type = "quorum"
    await scenario.prepare()
    worker = await long_worker(scenario, ledger)
    envelope = long_envelope("long_sleep", seconds=20 * CONSUMER_TIMEOUT, beat=0.5)
    await scenario.publish([(envelope, "long")])
    await settled(worker, ledger, envelope.run_id, stall=60)
    assert len(events(ledger, envelope.run_id, "start")) == 1
    assert len(events(ledger, envelope.run_id, "end")) == 1
    assert len(events(ledger, envelope.run_id, "beat")) == 160
    # History keeps a summary: at most one progress event a heartbeat interval (1 s), in order.
    progress = progress_events(worker, envelope.run_id)
    assert 40 <= len(progress) <= 81
    done = [event["progress"]["done"] for event in progress]
    assert done == sorted(done) and done[-1] >= 150
    assert '"reason": "succeeded"' in worker.log()
    assert "could not settle" not in worker.log()
    names, run_id = scenario.names, envelope.run_id
    assert await scenario.broker.depth(names.main_queue) == 0
    left = (claim_queue(names, run_id), lease_queue(names, run_id, scenario.plan.key))
    for queue in left:
        assert not await exists(scenario.broker.connection, queue), queue


@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
async def test_a_killed_workers_run_is_handed_over_within_the_bound_never_twice_at_once(
    scenario: FaultScenario, tmp_path: Path, queue_type: QueueType
) -> None:
    """kill -9 of the worker running a long attempt: the other worker starts it again within
    1.5 leases plus a second of slack, after the kill, and it succeeds there."""
    ledger = tmp_path / "long.jsonl"
    scenario.broker.queue_type = queue_type
    first, envelope = await running(scenario, ledger)
    second = await long_worker(scenario, ledger)
    first.kill()
    killed = time.time()
    [start] = await eventually(lambda: events(ledger, envelope.run_id, "start")[1:], 20)
    assert start["pid"] == second.pid
    assert killed < start["t"] < killed + 1.5 * LEASE + 1.0
    await settled(second, ledger, envelope.run_id)
    assert [end["pid"] for end in events(ledger, envelope.run_id, "end")] == [second.pid]


async def test_a_broker_restart_mid_attempt_loses_nothing_and_never_overlaps(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """A broker restart stops the attempt (its claim went with its connection); its parked
    copy comes back and runs to the end, started only after the first one stopped."""
    ledger = tmp_path / "long.jsonl"
    worker, envelope = await running(scenario, ledger)
    scenario.node.restart()
    await settled(worker, ledger, envelope.run_id, stall=60)
    await eventually(lambda: events(ledger, envelope.run_id, "end"), 60)
    first, second = events(ledger, envelope.run_id, "start")
    assert first["instance"] != second["instance"]
    beats = events(ledger, envelope.run_id, "beat")
    # The first attempt's last heartbeat came before the second began: never two at once.
    assert max(b["t"] for b in beats if b["instance"] == first["instance"]) < second["t"]
    [end] = events(ledger, envelope.run_id, "end")
    assert end["instance"] == second["instance"]


async def test_a_hung_handler_fails_as_hung_and_is_retried(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """A handler that stops heartbeating for three intervals is stopped as hung, and its
    retry (attempt 2) succeeds."""
    ledger = tmp_path / "long.jsonl"
    await scenario.prepare()
    worker = await long_worker(scenario, ledger, CRON_HEARTBEAT_MISSES="3")
    envelope = long_envelope("hangs_once")
    await scenario.publish([(envelope, "long")])
    await worker.wait_log('"reason": "hung"', timeout=30)
    await eventually(lambda: events(ledger, envelope.run_id, "end"), 30)
    assert [s["attempt"] for s in events(ledger, envelope.run_id, "start")] == [1, 2]


async def test_a_cancel_stops_a_long_attempt_and_it_never_comes_back(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """A cancel stored while a long attempt runs stops it, acked cancelled; its parked copy
    is removed, so nothing runs it again after its lease."""
    ledger = tmp_path / "long.jsonl"
    worker, envelope = await running(scenario, ledger)
    now = utcnow()
    tombstone = Tombstone(at=now, until=now + timedelta(hours=1), by="test", run_id=envelope.run_id)
    channel = await scenario.broker.channel()
    await store(channel, scenario.names, tombstone)
    said = f'"settled", "run": "{envelope.run_id}", "reason": "cancelled"'
    await worker.wait_log(said, timeout=15)
    lease = lease_queue(scenario.names, envelope.run_id, scenario.plan.key)
    assert not await exists(scenario.broker.connection, lease)
    # Past a lease and a half, nothing came back to run it.
    await asyncio.sleep(1.5 * LEASE + 1)
    assert len(events(ledger, envelope.run_id, "start")) == 1
    assert events(ledger, envelope.run_id, "end") == []


async def test_a_forbid_runs_next_fire_is_skipped_while_it_runs_and_while_it_is_handed_over(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """A Forbid schedule's long run blocks the next fires: one that comes while it runs, and
    one that comes after its worker was killed, before another worker took it over (its lock
    went with the dead worker's connection); it then ends on the other worker."""
    ledger = tmp_path / "long.jsonl"
    await scenario.prepare()
    first = await long_worker(scenario, ledger)
    forbid = {"schedule": "nightly", "concurrency": "Forbid"}
    runs = [
        long_envelope("long_sleep", seconds=8, beat=0.5).model_copy(update=forbid) for _ in range(3)
    ]
    await scenario.publish([(runs[0], "long")])
    await eventually(lambda: events(ledger, runs[0].run_id, "beat"), 20)
    await scenario.publish([(runs[1], "long")])
    await first.wait_log(f'"settled", "run": "{runs[1].run_id}", "reason": "lock-contended"')
    second = await long_worker(scenario, ledger)
    first.kill()
    await scenario.publish([(runs[2], "long")])
    await second.wait_log(f'"settled", "run": "{runs[2].run_id}", "reason": "lock-contended"')
    await settled(second, ledger, runs[0].run_id)
    assert events(ledger, runs[1].run_id, "start") == events(ledger, runs[2].run_id, "start") == []


async def test_a_worker_runs_no_more_long_attempts_than_its_prefetch(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """Long attempts ack their deliveries, so the prefetch no longer bounds them: a worker
    with a prefetch of 1 defers the second run, unspent, until the first ended; both succeed,
    one after the other."""
    ledger = tmp_path / "long.jsonl"
    await scenario.prepare()
    worker = await long_worker(scenario, ledger, CRON_PREFETCH="1")
    runs = [long_envelope("long_sleep", seconds=3, beat=0.5) for _ in range(2)]
    await scenario.publish([(run, "long") for run in runs])
    for run in runs:
        await settled(worker, ledger, run.run_id)
    assert '"reason": "long-attempts-full"' in worker.log()
    spans = [
        (run_span(ledger, run.run_id, "start"), run_span(ledger, run.run_id, "end")) for run in runs
    ]
    first, second = sorted(spans)
    assert first[1] <= second[0]  # the second began after the first ended
    assert [s["attempt"] for run in runs for s in events(ledger, run.run_id, "start")] == [1, 1]
