"""The broker stopped, or killed with kill -9, while tasks are published and consumed."""

from __future__ import annotations

import asyncio

import pytest

from tests.faults.harness import FaultScenario
from warren_cron.faultkit.ledger import Fate
from warren_cron.faultkit.waits import eventually
from warren_cron.faultkit.workload import misplaced, workload

pytestmark = pytest.mark.faults


async def break_node(scenario: FaultScenario, how: str) -> None:
    """Stop the node cleanly or kill -9 it, then start it again."""
    node = scenario.node
    await asyncio.to_thread(node.stop if how == "stop" else node.kill)
    await asyncio.to_thread(node.start)


@pytest.mark.parametrize("how", ["stop", "kill"])
async def test_a_broker_restart_during_a_publish_burst_loses_no_confirmed_task(
    scenario: FaultScenario, how: str
) -> None:
    """Quorum queues: every task the broker confirmed before or after a stop or a kill -9
    ends completed or failed."""
    scenario.broker.queue_type = "quorum"
    await scenario.prepare()
    await scenario.worker()
    await scenario.worker()
    tasks = workload(400, 7)
    burst = asyncio.create_task(scenario.publish(tasks, parallel=16))
    await eventually(lambda: scenario.ledger.count_confirmed() >= 100, 30)
    await break_node(scenario, how)
    await asyncio.wait_for(burst, 60)
    report = await scenario.check()
    assert scenario.ledger.count_confirmed() == 400
    assert misplaced(report) == [], report.table()


@pytest.mark.parametrize("queue_type", ["classic", "quorum"])
async def test_a_broker_killed_with_unacked_deliveries_loses_nothing(
    scenario: FaultScenario, queue_type: str
) -> None:
    """kill -9 while two workers hold sixteen running tasks: all are redelivered and settle."""
    scenario.broker.queue_type = queue_type  # type: ignore[assignment]
    await scenario.prepare()
    await scenario.publish(workload(60, 11, seconds=1.0))
    await scenario.worker()
    await scenario.worker()
    await eventually(lambda: scenario.ledger.count_attempts() >= 16, 30)
    await break_node(scenario, "kill")
    report = await scenario.check(timeout=90)
    assert misplaced(report) == [], report.table()
    redelivered = [run for run in report.runs.values() if any(r for _, r, _ in run.attempts)]
    assert redelivered, report.table()
    assert report.counts()[Fate.LOST] == 0


@pytest.mark.long
@pytest.mark.parametrize("how", ["stop", "kill"])
async def test_on_classic_queues_a_broker_restart_loses_only_tasks_between_queues(
    scenario: FaultScenario, how: str
) -> None:
    """Classic queues: a broker stop or kill -9 may lose only tasks being dead-lettered, as
    documented; waiting or running tasks survive."""
    # RabbitMQ dead-letters classic-queue messages at most once: a stop too shuts the queues
    # down one by one, and a retry queue's expired task sent to a main queue already gone is
    # dropped (3 of 400 with 100-200 ms retries, seen under load).
    await scenario.prepare()
    await scenario.worker()
    await scenario.worker()
    burst = asyncio.create_task(scenario.publish(workload(400, 7), parallel=16))
    await eventually(lambda: scenario.ledger.count_confirmed() >= 100, 30)
    await break_node(scenario, how)
    await asyncio.wait_for(burst, 60)
    report = await scenario.wait_quiet(timeout=30)
    for run_id in report.lost:
        *_, (_, _, outcome) = report.runs[run_id].attempts or [(0, False, "never ran")]
        assert outcome == "retryable", (run_id, report.runs[run_id].attempts)
    assert report.unexpected == [] and report.unexplained == []
