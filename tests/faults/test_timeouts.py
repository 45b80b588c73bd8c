"""Tasks that outlive the broker's consumer_timeout (4 s on the private node)."""

from __future__ import annotations

import pytest

from tests.faults.harness import FaultScenario
from warren_cron.faultkit.ledger import Fate
from warren_cron.faultkit.workload import ledger_envelope

pytestmark = pytest.mark.faults


async def test_a_worker_refuses_a_task_timeout_at_the_consumer_timeout(
    scenario: FaultScenario,
) -> None:
    """Started with a task timeout equal to consumer_timeout, the worker exits 2 naming both."""
    proc = scenario.spawn_worker(CRON_TASK_TIMEOUT_SECONDS="4")
    assert await proc.wait() == 2
    assert "CRON_TASK_TIMEOUT_SECONDS" in proc.log()
    assert "CRON_CONSUMER_TIMEOUT_SECONDS" in proc.log()


async def test_a_handler_asking_past_the_consumer_timeout_runs_long_and_once(
    scenario: FaultScenario,
) -> None:
    """A 10 s handler asking for 100 s (three times consumer_timeout): it runs as a long
    attempt (its delivery parked and acked, docs/long-jobs.md), once, and succeeds; the broker
    never steps in."""
    await scenario.prepare()
    runaway = ledger_envelope("runaway", seconds=10)
    runaway = runaway.model_copy(update={"timeout_seconds": 100.0})
    await scenario.publish([(runaway, "runaway")])
    worker = await scenario.worker()
    report = await scenario.check(timeout=60)
    run = report.runs[runaway.run_id]
    assert run.fate is Fate.COMPLETED
    assert [(n, outcome) for n, _, outcome in run.attempts] == [(1, "ok")]
    assert "could not settle" not in worker.log()
