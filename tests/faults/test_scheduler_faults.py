"""Schedulers that die, miss fires, or lose the broker: every fire still runs.

The oracle: a one-second schedule with ``catch_up = "all"`` has a fire at every whole second,
so every second between the first and the last fire that ran must have run (no gap) and no
fire may run that the schedule does not have.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.faults.harness import FREEZE_SECONDS, FaultScenario, Judged
from warren_cron.clock import utc_text
from warren_cron.faultkit.ledger import Report
from warren_cron.faultkit.processes import Proc
from warren_cron.faultkit.waits import eventually

pytestmark = pytest.mark.faults

SCHEDULE = "tick"
SCHEDULES = f"""
[[schedule]]
name = "{SCHEDULE}"
every = "1s"
task = "ledgered"
catch_up = "all"
misfire_grace_seconds = 600
retry = {{ max_retries = 2, delay_ms = 100 }}
"""
LEADING = '"leading"'
STANDING_BY = '"standing by: another scheduler leads"'


def spawn_scheduler(scenario: Judged, path: Path, ready: str = LEADING, **extra: str) -> Proc:
    """A ``warren scheduler`` on the scenario's namespace with quick failover."""
    return scenario.procs.spawn(
        ["-m", "warren_cron.scheduler"],
        ready,
        **scenario.worker_env(),
        CRON_SCHEDULES_FILE=str(path),
        CRON_LEADER_RETRY_SECONDS="0.2",
        CRON_SCHEDULES_POLL_SECONDS="0",
        CRON_SCHEDULER_HEARTBEAT_SECONDS="2",
        **extra,
    )


def schedules_file(tmp_path: Path) -> Path:
    """The one-second schedule on disk."""
    path = tmp_path / "schedules.toml"
    path.write_text(SCHEDULES, encoding="utf-8")
    return path


async def more_fires(scenario: Judged, count: int = 3, timeout: float = 30) -> None:
    """Wait until ``count`` more attempts ran than now."""
    start = scenario.ledger.count_attempts()
    await eventually(lambda: scenario.ledger.count_attempts() >= start + count, timeout)


async def fires_report(scenario: Judged) -> tuple[Report, list[datetime]]:
    """Settle, expect every whole second between the first and the last fire run, classify."""
    seen = (await scenario.wait_quiet()).unexpected  # fires are not published by the test
    times = sorted(datetime.fromisoformat(run_id.split("@", 1)[1]) for run_id in seen)
    moment = times[0]
    while moment <= times[-1]:
        run_id = f"{SCHEDULE}@{utc_text(moment)}"
        scenario.ledger.publishing(run_id, SCHEDULE)
        scenario.ledger.confirmed(run_id)
        moment += timedelta(seconds=1)
    return scenario.ledger.report(), times


async def test_a_standby_takes_over_when_the_leader_is_killed_and_no_fire_is_lost(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """kill -9 of the leading scheduler: the standby leads and catches up every fire."""
    await scenario.prepare()
    await scenario.worker()
    path = schedules_file(tmp_path)
    leader = await spawn_scheduler(scenario, path).ready()
    standby = await spawn_scheduler(scenario, path, STANDING_BY).ready()
    await more_fires(scenario)
    leader.kill()
    await standby.wait_log(LEADING, timeout=30)
    await more_fires(scenario)
    assert await standby.terminate() == 0
    report, times = await fires_report(scenario)
    assert (report.lost, report.unexpected) == ([], []), report.table()
    # Six attempts ran; a kill between a fire's confirm and its watermark repeats that one
    # fire (at least once, as documented), so at least five distinct fires.
    assert len(times) >= 5


async def test_fires_missed_while_no_scheduler_runs_are_caught_up(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """The only scheduler is down for three seconds: the next one publishes what fell due."""
    await scenario.prepare()
    await scenario.worker()
    path = schedules_file(tmp_path)
    first = await spawn_scheduler(scenario, path).ready()
    await more_fires(scenario, 2)
    first.kill()
    await asyncio.sleep(3)  # fires fall due with no scheduler running
    second = await spawn_scheduler(scenario, path).ready()
    await second.wait_log('"catching up from the watermark"')
    await more_fires(scenario, 5)
    assert await second.terminate() == 0
    report, times = await fires_report(scenario)
    assert (report.lost, report.unexpected) == ([], []), report.table()
    assert times[-1] - times[0] >= timedelta(seconds=5)


async def test_a_scheduler_keeps_firing_after_lost_connections_and_a_frozen_broker(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """After closed connections and a frozen broker it leads again; no fire is missing."""
    await scenario.prepare()
    await scenario.worker()
    scheduler = await spawn_scheduler(scenario, schedules_file(tmp_path)).ready()
    await more_fires(scenario, 2)
    await asyncio.to_thread(scenario.node.ctl, "close_all_connections", "fault test")
    await scheduler.wait_log(LEADING, count=2)
    await more_fires(scenario, 2)
    scenario.node.freeze()
    try:
        await asyncio.sleep(
            FREEZE_SECONDS
        )  # past the heartbeat grace: the scheduler must reconnect
    finally:
        scenario.node.thaw()
    await scheduler.wait_log(LEADING, count=3, timeout=60)
    await more_fires(scenario, 3)
    assert await scheduler.terminate() == 0
    report, _ = await fires_report(scenario)
    assert (report.lost, report.unexpected) == ([], []), report.table()
