"""``handover``: how long a killed scheduler's schedules go unled, one leader against partitions.

Two schedulers on N schedules none of which is due soon: with one partition, one leads and
one stands by; with ``--partitions``, they split them. Once both are at rest, the first is
killed with SIGKILL and the clock runs until the other is ready to fire what the first led:
with one partition, until the standby has read the store and built its heap (its
"runtime schedules read" line); with partitions, until it says it leads every partition
(its "leading partitions" line, written once the schedules it won are in its heap).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchlib.common import Bench, log_time, print_table, reap
from benchlib.fire import idle_timing, quiesce
from benchlib.scheduling import (
    PLAN,
    events,
    leading_partitions,
    reset,
    schedules_text,
    spread_over,
    start,
    start_scheduler,
)
from warren_cron.faultkit.waits import until

READ = b'"event":"runtime schedules read"'
STANDING_BY = b"standing by: another scheduler leads"
SPLIT = b'"event":"leading partitions"'


def handover_round(bench: Bench, count: int, partitions: int, workdir: Path) -> float:
    """Seconds from the leader's SIGKILL until the other scheduler is ready for its share."""
    bench.partitions = partitions
    path = workdir / "handover.toml"
    path.write_text(schedules_text(count, idle_timing, datetime.now(UTC)), encoding="utf-8")
    stamp = int(time.time())
    logs = [workdir / f"handover-{partitions}-{n}-{stamp}.log" for n in range(2)]
    env = {"CRON_SCHEDULER_PARTITIONS": str(partitions)}
    first = start_scheduler(bench, path, logs[0], 600, **env)
    quiesce(first.pid, 600)  # the file written into the store
    second = start(
        ["-m", "warren_cron.scheduler"], bench, logs[1], CRON_SCHEDULES_FILE=str(path), **env
    )
    if partitions > 1:
        until(lambda: spread_over(logs, partitions), 300)
    else:
        until(lambda: bool(events(logs[1], STANDING_BY)), 300)
    quiesce(second.pid, 600)
    killed = time.time()
    first.kill()
    reap(first)
    moment = ready(logs[1], partitions)
    reap(second)
    asyncio.run(reset(bench))
    return moment - killed


def ready(log: Path, partitions: int) -> float:
    """When the scheduler that stayed was ready to fire every schedule."""
    if partitions > 1:
        whole = set(range(partitions))
        until(lambda: leading_partitions(log) == whole, 300)
        return log_time(events(log, SPLIT)[-1])
    until(lambda: bool(events(log, READ)), 300)
    return log_time(events(log, READ)[-1])


def handover(args: argparse.Namespace, bench: Bench, workdir: Path) -> dict[str, Any]:
    """A killed leader's schedules led again: one leader and a standby, against partitions."""
    bench.plan_keys.update(step.key for step in PLAN.suffixes())
    one: list[float] = []
    split: list[float] = []
    for _ in range(args.rounds):
        one.append(handover_round(bench, args.schedules, 1, workdir))
        split.append(handover_round(bench, args.schedules, args.partitions, workdir))
    bench.partitions = args.partitions  # the namespace's clean-up deletes their queues
    print_table(
        f"handover: {args.schedules:,} schedules, the leader killed, 2 schedulers",
        [
            ("one leader: standby ready s", one),
            (f"{args.partitions} partitions: all led again s", split),
        ],
    )
    return {
        "one_leader_seconds": statistics.median(one),
        "partitions_seconds": statistics.median(split),
    }


def add_command(sub: Any) -> None:
    """The ``handover`` subcommand and its options."""
    command = sub.add_parser("handover", help=handover.__doc__)
    command.add_argument("--schedules", type=int, default=100_000)
    command.add_argument("--partitions", type=int, default=64)
