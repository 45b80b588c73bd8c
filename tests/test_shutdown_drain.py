"""SIGTERM to a worker process under load: running attempts end within the grace or go back
unacked, nothing is lost, and the process exits 0 within the grace (docs/kubernetes.md)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import plan
from tests.helpers import envelope, publish_all
from tests.namespace import TestBroker
from tests.scheduling import Process, Spawner, env_for

pytestmark = pytest.mark.broker

#: What a worker may take beyond its grace to close its connections and exit: the margin the
#: manifests add to CRON_SHUTDOWN_GRACE_SECONDS (tests/test_kubernetes_manifests.py).
EXIT_MARGIN_SECONDS = 10.0


async def start_worker(
    broker: TestBroker, spawn: Spawner, ledger: Path, grace: float, tasks: int, seconds: float
) -> tuple[Process, set[str]]:
    """Publish ``tasks`` naps of ``seconds``, start a worker, wait until its prefetch runs."""
    runs = [envelope("nap", {"seconds": seconds}) for _ in range(tasks)]
    await publish_all(broker, runs, plan(60_000))
    env = env_for(
        broker,
        CRON_HANDLER_MODULES="tests.drain_handlers",
        CRON_SHUTDOWN_GRACE_SECONDS=str(grace),
        CRON_PREFETCH="16",
        WARREN_TEST_LEDGER=str(ledger),
    )
    process = await spawn(["-m", "warren_cron.worker"], env)
    await process.wait_event("nap started", count=16, timeout=30)
    return process, {run.run_id for run in runs}


async def stopped_within(process: Process, seconds: float) -> float:
    """SIGTERM; assert exit 0 within ``seconds``; return how long it took."""
    began = time.monotonic()
    code = await process.stop(timeout=seconds + 30)
    took = time.monotonic() - began
    assert code == 0, process.events[-5:]
    assert took <= seconds, f"exit took {took:.1f} s, more than {seconds} s"
    return took


async def test_sigterm_under_load_lets_running_attempts_finish_and_loses_nothing(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """48 naps of 1 s, 16 running at SIGTERM: those end within a grace of 8 s and are acked;
    the rest stay in the main queue; every run is done or waiting, none failed or retried."""
    ledger = tmp_path / "done.txt"
    process, published = await start_worker(broker, spawn, ledger, 8, 48, 1.0)
    await stopped_within(process, 8 + EXIT_MARGIN_SECONDS)
    done = set(ledger.read_text().split())
    assert len(done) >= 16  # the attempts running at SIGTERM finished
    waiting = await broker.get_all(broker.names.main_queue)
    assert done | {m.message_id for m in waiting} == published
    assert all("x-death" not in (m.headers or {}) for m in waiting)
    assert await broker.depth(broker.names.failed_queue) == 0


async def test_sigterm_hands_attempts_longer_than_the_grace_back_unacked(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """Naps of 120 s with a grace of 1 s: the worker exits 0 within the grace and its margin,
    and every run is back in the main queue, redelivered, no retry spent."""
    ledger = tmp_path / "done.txt"
    process, published = await start_worker(broker, spawn, ledger, 1, 20, 120.0)
    await stopped_within(process, 1 + EXIT_MARGIN_SECONDS)
    assert not ledger.exists()
    waiting = await broker.get_all(broker.names.main_queue)
    assert {m.message_id for m in waiting} == published
    assert all("x-death" not in (m.headers or {}) for m in waiting)
    assert sum(m.redelivered for m in waiting) == 16  # the ones that were running
