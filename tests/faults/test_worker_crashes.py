"""Workers that die: kill -9 and SIGTERM mid-task, and handlers that kill their own process."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import orjson
import pytest

from tests.faults.harness import FaultScenario
from warren_cron.faultkit.ledger import Fate
from warren_cron.faultkit.private_broker import holding
from warren_cron.faultkit.processes import Proc
from warren_cron.faultkit.waits import NeverHappened, eventually
from warren_cron.faultkit.workload import ledger_envelope
from warren_cron.headers import x_death
from warren_cron.plan import RetryPlan

pytestmark = pytest.mark.faults


async def wait_attempts(scenario: FaultScenario, count: int, timeout: float = 30) -> None:
    """Wait until the ledger holds ``count`` attempts; else say where the broker holds tasks."""
    try:
        await eventually(
            lambda: scenario.ledger.count_attempts() >= count, timeout, what=f"attempt {count}"
        )
    except NeverHappened as never:
        where = await asyncio.to_thread(holding, scenario.node)
        seen = scenario.ledger.count_attempts()
        raise NeverHappened(f"{never}; {seen} attempts, held by:\n{where}") from None


async def keep_one_worker(
    scenario: FaultScenario, done: Callable[[], Awaitable[bool]], timeout: float = 90, **env: str
) -> int:
    """Play supervisor: restart the worker whenever it dies, until ``done()``; count starts."""
    starts, proc = 0, None
    async with asyncio.timeout(timeout):
        while not await done():
            if proc is None or not proc.alive():
                proc = scenario.spawn_worker(**env)
                starts += 1
            await asyncio.sleep(0.2)
    return starts


async def crash_queues(scenario: FaultScenario) -> list[str]:
    """Crash-marker queues of the scenario's namespace still on the node."""
    out = await asyncio.to_thread(scenario.node.ctl, "list_queues", "name", "--formatter", "json")
    prefix = scenario.names.crash_queue("")
    return [row["name"] for row in orjson.loads(out) if row["name"].startswith(prefix)]


async def test_a_worker_killed_mid_task_loses_nothing(scenario: FaultScenario) -> None:
    """kill -9 with eight tasks in flight: another worker runs them all, as redeliveries."""
    await scenario.prepare()
    first = await scenario.worker()
    await scenario.publish((ledger_envelope("slow", seconds=1.0), "slow") for _ in range(20))
    await wait_attempts(scenario, 8)
    first.kill()
    await scenario.worker()
    report = await scenario.check()
    assert report.counts()[Fate.COMPLETED] + report.counts()[Fate.DUPLICATED] == 20
    redelivered = [run for run in report.runs.values() if any(r for _, r, _ in run.attempts)]
    assert len(redelivered) >= 8, report.table()


async def test_sigterm_mid_task_exits_0_and_the_next_worker_runs_it_as_the_same_attempt(
    scenario: FaultScenario,
) -> None:
    """SIGTERM past the grace: exit code 0, each task runs again as attempt 1, none in failed."""
    await scenario.prepare()
    first = await scenario.worker()
    await scenario.publish((ledger_envelope("slow", seconds=2.5), "slow") for _ in range(4))
    await wait_attempts(scenario, 4)
    assert await first.terminate() == 0
    await scenario.worker()
    report = await scenario.check()
    assert report.counts()[Fate.COMPLETED] == 4, report.table()
    for run in report.runs.values():
        assert [(n, outcome) for n, _, outcome in run.attempts] == [
            (1, "interrupted"),
            (1, "ok"),
        ]


async def test_a_task_that_kills_its_worker_on_a_classic_queue_ends_as_crash_loop(
    scenario: FaultScenario,
) -> None:
    """The handler kills its process every time: after limit + 1 runs it is failed, not looped."""
    await scenario.prepare()
    killer = ledger_envelope("suicide", suicide=True)
    innocent = ledger_envelope("ok")
    await scenario.publish([(killer, "suicide"), (innocent, "ok")])

    async def failed() -> bool:
        return await scenario.broker.depth(scenario.names.failed_queue) >= 1

    starts = await keep_one_worker(scenario, failed, CRON_PREFETCH="1")
    report = await scenario.check()
    loop, ok = report.runs[killer.run_id], report.runs[innocent.run_id]
    assert (loop.fate, loop.reasons, ok.fate) == (Fate.FAILED, ["crash-loop"], Fate.COMPLETED)
    assert [n for n, _, _ in loop.attempts] == [1, 1, 1, 1]  # limit 3, plus the first
    assert starts == 5  # four deaths, then one worker that fails it and runs the other task
    assert await crash_queues(scenario) == []


async def test_graceful_shutdowns_of_a_redelivered_task_are_no_crash_loop(
    scenario: FaultScenario,
) -> None:
    """One kill -9, then four SIGTERMs mid-task: the fifth worker still runs it to success."""
    await scenario.prepare()
    task = ledger_envelope("slow", seconds=2.0)
    await scenario.publish([(task, "slow")])
    first = await scenario.worker()
    await wait_attempts(scenario, 1)
    first.kill()
    for n in range(2, 6):
        proc: Proc = await scenario.worker()
        await wait_attempts(scenario, n)
        assert await proc.terminate() == 0
    await scenario.worker()
    report = await scenario.check()
    run = report.runs[task.run_id]
    assert run.fate is Fate.COMPLETED, report.table()
    assert [outcome for _, _, outcome in run.attempts] == [None] + ["interrupted"] * 4 + ["ok"]
    assert await crash_queues(scenario) == []


async def test_a_task_that_kills_its_worker_on_a_quorum_queue_ends_at_the_delivery_limit(
    scenario: FaultScenario,
) -> None:
    """Quorum: the worker fails the last delivery the broker allows, before a retry could loop."""
    scenario.broker.queue_type = "quorum"
    scenario.delivery_limit = 2
    scenario.plan = RetryPlan((100,))
    await scenario.prepare()
    killer = ledger_envelope("suicide", suicide=True)
    await scenario.publish([(killer, "suicide")])

    async def failed() -> bool:
        return await scenario.broker.depth(scenario.names.failed_queue) >= 1

    starts = await keep_one_worker(scenario, failed, CRON_PREFETCH="1")
    report = await scenario.check()
    run = report.runs[killer.run_id]
    assert (run.fate, run.reasons) == (Fate.FAILED, ["delivery-limit"])
    assert [(n, outcome) for n, _, outcome in run.attempts] == [(1, None), (1, None)]
    assert starts == 3


async def test_past_the_delivery_limit_the_broker_moves_a_final_attempt_to_the_failed_queue(
    scenario: FaultScenario,
) -> None:
    """Without a worker to stop it, the broker dead-letters it by its key ``final`` to failed."""
    scenario.broker.queue_type = "quorum"
    scenario.delivery_limit = 2
    scenario.plan = RetryPlan(())
    await scenario.prepare()
    task = ledger_envelope("returned")
    await scenario.publish([(task, "returned")])
    for _ in range(scenario.delivery_limit + 1):
        channel = await scenario.broker.channel()
        main = await channel.declare_queue(scenario.names.main_queue, passive=True)
        assert await main.get(timeout=5) is not None
        await channel.close()  # unacked: returned to the queue, counted as a delivery
    await scenario.broker.wait_depth(scenario.names.failed_queue, 1)
    [record] = await scenario.collect_failed()
    [death] = x_death(record.headers)
    assert (death["queue"], death["reason"], record.routing_key) == (
        scenario.names.main_queue,
        "delivery_limit",
        "final",
    )
    assert scenario.ledger.report().runs[task.run_id].fate is Fate.FAILED
