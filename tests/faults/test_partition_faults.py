"""Schedules split across schedulers when the broker goes: every fire still runs.

The oracle is the scheduler fault tests' one, for each schedule: a one-second schedule with
``catch_up = "all"`` fires at every whole second, so every second between its first fire
that ran and its last must have run, and nothing it does not have may run.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.faults.harness import ClusterScenario, FaultScenario, Judged
from tests.scheduling import evenly_led, partitioned
from warren_cron.clock import utc_text
from warren_cron.faultkit.ledger import Report
from warren_cron.faultkit.processes import Proc
from warren_cron.faultkit.waits import NeverHappened, eventually
from warren_cron.scheduler.shares import partition_of

pytestmark = pytest.mark.faults

PARTITIONS = 8


def two_of_each_partition() -> list[str]:
    """Schedule names, two in each partition: a move always carries fires with it."""
    names: list[str] = []
    for n in range(1000):
        name = f"tick-{n}"
        mine = partition_of(name, PARTITIONS)
        if sum(partition_of(other, PARTITIONS) == mine for other in names) < 2:
            names.append(name)
    return sorted(names)


SCHEDULES = two_of_each_partition()
LEADING = '"leading"'
GIVEN_UP = '"partitions given up"'


def schedules_file(tmp_path: Path) -> Path:
    """One-second schedules, two in each partition."""
    path = tmp_path / "schedules.toml"
    path.write_text(
        "".join(
            f'[[schedule]]\nname = "{name}"\nevery = "1s"\ntask = "ledgered"\n'
            'catch_up = "all"\nmisfire_grace_seconds = 600\n'
            for name in SCHEDULES
        ),
        encoding="utf-8",
    )
    return path


def spawn_scheduler(scenario: FaultScenario | ClusterScenario, path: Path, **extra: str) -> Proc:
    """A ``warren scheduler`` of 8 partitions with quick beats and failover."""
    scenario.broker.partitions = PARTITIONS  # their queues go with the namespace
    return scenario.procs.spawn(
        ["-m", "warren_cron.scheduler"],
        LEADING,
        **scenario.worker_env(),
        **partitioned(path, PARTITIONS, heartbeat=2),
        **extra,
    )


def leads(proc: Proc) -> set[int]:
    """The partitions ``proc`` said last that it leads."""
    said = [line for line in proc.log().splitlines() if '"leading partitions"' in line]
    return set(json.loads(said[-1])["partitions"]) if said else set()


def spread(procs: list[Proc]) -> bool:
    """Every partition led by exactly one of ``procs``, each within one of the others."""
    return evenly_led([leads(p) for p in procs], PARTITIONS)


def said(procs: list[Proc]) -> str:
    """What each of ``procs`` leads and its last log lines: why the spread did not come."""
    return "\n".join(
        f"== {proc.log_path.name} leads {sorted(leads(proc))}\n" + proc.log()[-4000:]
        for proc in procs
    )


async def every_second_ran(scenario: Judged) -> tuple[Report, dict[str, list[datetime]]]:
    """Settle; expect each schedule's every whole second between its first fire and its
    last; assert none is lost or unexpected; the report and each schedule's fire times."""
    seen = (await scenario.wait_quiet()).unexpected  # fires are not published by the test
    times: dict[str, list[datetime]] = {}
    for run_id in seen:
        name, at = run_id.split("@", 1)
        times.setdefault(name, []).append(datetime.fromisoformat(at))
    for name, fired in times.items():
        moment = min(fired)
        while moment <= max(fired):
            run_id = f"{name}@{utc_text(moment)}"
            scenario.ledger.publishing(run_id, name)
            scenario.ledger.confirmed(run_id)
            moment += timedelta(seconds=1)
    report = scenario.ledger.report()
    assert (report.lost, report.unexpected) == ([], []), report.table()
    return report, times


async def test_a_broker_restart_while_partitions_move_loses_no_fire(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """Two schedulers split 8 partitions; a third joins, and the broker restarts as the
    first partitions move to it: all three lead again, the 8 partitions spread over them,
    and every schedule ran every second through the move and the outage."""
    await scenario.prepare()
    await scenario.worker()
    path = schedules_file(tmp_path)
    pair = [await spawn_scheduler(scenario, path).ready() for _ in range(2)]
    await eventually(lambda: spread(pair), 30, what="8 partitions over 2")
    given = sum(p.count(GIVEN_UP) for p in pair)
    third = spawn_scheduler(scenario, path)
    await eventually(lambda: sum(p.count(GIVEN_UP) for p in pair) > given, 30, what="a move")
    await asyncio.to_thread(scenario.node.restart)
    trio = [*pair, third]
    try:
        await eventually(lambda: spread(trio), 60, what="8 partitions over 3 after the restart")
    except NeverHappened as error:
        raise AssertionError(f"{error}\n{said(trio)}") from None
    restarted = scenario.ledger.count_attempts()
    await eventually(lambda: scenario.ledger.count_attempts() >= restarted + 3 * len(SCHEDULES), 60)
    assert [await p.terminate() for p in trio] == [0, 0, 0]
    _, times = await every_second_ran(scenario)
    assert sorted(times) == SCHEDULES
    assert all(max(fired) - min(fired) >= timedelta(seconds=5) for fired in times.values())
