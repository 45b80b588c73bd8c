"""Connections cut by the broker, a broker that stops answering, and a consumer cancelled by it."""

from __future__ import annotations

import asyncio

import pytest

from tests.faults.harness import FREEZE_SECONDS, FaultScenario
from warren_cron.faultkit.ledger import Fate
from warren_cron.faultkit.processes import Proc
from warren_cron.faultkit.waits import eventually
from warren_cron.faultkit.workload import ledger_envelope, workload

pytestmark = pytest.mark.faults


def pids_of(scenario: FaultScenario, run_ids: list[str]) -> set[int]:
    """Processes that ran attempts of ``run_ids``."""
    return {pid for run_id in run_ids for pid, *_ in scenario.ledger.attempts_of(run_id)}


async def later_tasks_complete_on(
    scenario: FaultScenario, workers: list[Proc], timeout: float = 60
) -> None:
    """20 tasks published now succeed, none fails, run by ``workers``, all still alive. One
    may run twice when the broker closed a connection under it (RabbitMQ 4.3.6 closed some
    with INTERNAL_ERROR right after a thaw): a redelivery, or a publish sent again, which
    ``check`` asserts the ledger explains."""
    later = [ledger_envelope("ok") for _ in range(20)]
    await scenario.publish((env, "ok") for env in later)
    report = await scenario.check(timeout)
    assert all(w.alive() for w in workers)
    assert pids_of(scenario, [env.run_id for env in later]) <= {w.pid for w in workers}
    runs = [report.runs[env.run_id] for env in later]
    assert all(run.successes >= 1 and not run.records for run in runs), report.table()


async def test_workers_reconnect_after_the_broker_closes_every_connection(
    scenario: FaultScenario,
) -> None:
    """close_all_connections mid-task: tasks are redelivered, the same workers go on."""
    await scenario.prepare()
    workers = [await scenario.worker(), await scenario.worker()]
    await scenario.publish(workload(40, 3, seconds=0.5))
    await eventually(lambda: scenario.ledger.count_attempts() >= 10, 30)
    await asyncio.to_thread(scenario.node.ctl, "close_all_connections", "fault test")
    await later_tasks_complete_on(scenario, workers)


async def test_workers_resume_after_the_broker_froze_past_several_heartbeats(
    scenario: FaultScenario,
) -> None:
    """kill -STOP past the heartbeat grace, then -CONT: the workers reconnect, nothing lost."""
    await scenario.prepare()
    workers = [await scenario.worker(), await scenario.worker()]
    await scenario.publish(workload(30, 5, seconds=0.5))
    await eventually(lambda: scenario.ledger.count_attempts() >= 10, 30)
    scenario.node.freeze()
    try:
        await asyncio.sleep(FREEZE_SECONDS)  # past the heartbeat grace: it must reconnect
    finally:
        scenario.node.thaw()
    await later_tasks_complete_on(scenario, workers, timeout=90)


async def test_a_worker_consumes_again_after_its_queue_was_deleted_under_it(
    scenario: FaultScenario,
) -> None:
    """The main queue deleted (consumer cancelled): the same worker redeclares it, consumes."""
    await scenario.prepare()
    worker = await scenario.worker()
    channel = await scenario.broker.channel()
    await channel.queue_delete(scenario.names.main_queue)
    await channel.close()
    later = [ledger_envelope("ok") for _ in range(10)]
    await scenario.publish((env, "ok") for env in later)
    report = await scenario.check()
    assert worker.alive()
    assert {report.runs[env.run_id].fate for env in later} == {Fate.COMPLETED}
    assert pids_of(scenario, [env.run_id for env in later]) == {worker.pid}
