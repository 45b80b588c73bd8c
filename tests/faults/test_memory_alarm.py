"""A broker memory alarm blocks every publisher: consumers must keep acking, nothing is lost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.faults.harness import FaultScenario
from warren_cron.faultkit.ledger import Fate
from warren_cron.faultkit.ledger_handlers import LedgerHandler
from warren_cron.faultkit.waits import eventually
from warren_cron.faultkit.worker_tasks import TASK
from warren_cron.faultkit.workload import ledger_envelope
from warren_cron.worker.registry import Registry

pytestmark = pytest.mark.faults


async def alarm_raised(scenario: FaultScenario) -> bool:
    """True while the node reports a memory alarm."""
    alarms = await asyncio.to_thread(scenario.node.ctl, "eval", "rabbit_alarm:get_alarms().")
    return "memory" in alarms


@pytest.fixture
async def memory_alarm(scenario: FaultScenario) -> AsyncIterator[Any]:
    """A function that raises the alarm (watermark 0); the watermark is restored afterwards."""

    async def raise_alarm() -> None:
        await asyncio.to_thread(scenario.node.ctl, "set_vm_memory_high_watermark", "0")
        await eventually(lambda: alarm_raised(scenario), 15, interval=0.2)

    yield raise_alarm
    await asyncio.to_thread(scenario.node.ctl, "set_vm_memory_high_watermark", "0.4")


async def test_under_a_memory_alarm_consumers_keep_acking_and_publishers_recover(
    scenario: FaultScenario,
    run_private_worker: Any,
    memory_alarm: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Successes are acked during the alarm, failures dead-lettered, publishers resume."""
    monkeypatch.setattr("warren_cron.worker.fate.RECORD_TIMEOUT_SECONDS", 1.0)
    await scenario.prepare()
    ok = [ledger_envelope("ok") for _ in range(20)]
    failing = [ledger_envelope("permanent", permanent=True) for _ in range(3)]
    await scenario.publish([(env, "ok") for env in ok] + [(env, "permanent") for env in failing])
    await memory_alarm()
    later = [ledger_envelope("ok") for _ in range(5)]
    blocked = asyncio.create_task(scenario.publish((env, "ok") for env in later))
    registry = Registry()
    registry.register(TASK, LedgerHandler(scenario.ledger))
    await run_private_worker(registry)
    await scenario.broker.wait_depth(scenario.names.failed_queue, len(failing), timeout=30)
    during = scenario.ledger.report()
    assert {during.runs[env.run_id].fate for env in ok} == {Fate.COMPLETED}
    assert not blocked.done() and scenario.ledger.count_confirmed() == len(ok) + len(failing)
    await asyncio.to_thread(scenario.node.ctl, "set_vm_memory_high_watermark", "0.4")
    await asyncio.wait_for(blocked, 30)
    report = await scenario.check()
    # A publisher blocked by the alarm may send again after a lost confirm: a duplicate
    # with that cause is allowed, an unexplained one or a loss is not.
    assert {report.runs[env.run_id].fate for env in later} <= {Fate.COMPLETED, Fate.DUPLICATED}
    assert not report.unexplained, report.table()
    for env in failing:
        assert "dead-lettered:rejected" in report.runs[env.run_id].reasons, report.table()
