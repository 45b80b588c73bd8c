"""``fire``: a burst of fires due in the same second, and the scheduler at rest.

The burst runs ``warren scheduler`` on N schedules that all fire at one whole minute (half
cron with a few dozen expressions, half anchored intervals, like a real file), clocked from
that second to the last confirmed fire (the ``late_ms`` each fire's line gives: when its
confirm came). Interleaved with it, a plain aio-pika publisher sends N messages the way most
clients would (``Exchange.publish``, persistent, mandatory, 500 confirms in flight).

At rest: the scheduler on 100,000 schedules none of which is due for ten minutes; CPU over a
quiet window once its start is over, and RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aio_pika
import orjson

from benchlib.common import (
    Bench,
    LineCounter,
    Run,
    cpu_seconds,
    log_time,
    print_table,
    reap,
    rss_mb,
)
from benchlib.scheduling import (
    LEADING,
    PLAN,
    PUBLISHED,
    events,
    reset,
    schedules_text,
    spread_over,
    start_scheduler,
    toml_time,
)
from warren_cron.faultkit.waits import until

#: Cron schedules of the burst use this many distinct expressions.
CRON_VARIETY = 59
#: Schedules at rest fire no earlier than this after the run starts.
IDLE_QUIET = timedelta(minutes=10)


def burst_timing(index: int, due: datetime) -> str:
    """Half cron (a few dozen expressions), half anchored intervals; all fire at ``due``."""
    if index % 2:
        other = (due.minute + 1 + index // 2 % CRON_VARIETY) % 60
        return f'cron = "{due.minute},{other} * * * *"'
    every = ("1m", "5m", "1h", "1d")[index // 2 % 4]
    return f'every = "{every}"\nstart_at = {toml_time(due)}'


def idle_timing(index: int, now: datetime) -> str:
    """Half daily cron, half daily intervals, none due within ``IDLE_QUIET`` of ``now``."""
    minutes = int(IDLE_QUIET.total_seconds() // 60) + index % (24 * 60 - 30)
    at = now + timedelta(minutes=minutes)
    if index % 2:
        return f'cron = "{at.minute} {at.hour} * * *"'
    return f'every = "1d"\nstart_at = {toml_time(at - timedelta(days=1))}'


def next_due(margin: float) -> datetime:
    """The first whole minute at least ``margin`` seconds away."""
    earliest = datetime.now(UTC) + timedelta(seconds=margin)
    due = earliest.replace(second=0, microsecond=0)
    return due if due >= earliest else due + timedelta(minutes=1)


def burst_round(bench: Bench, count: int, workdir: Path, schedulers: int = 1) -> Run:
    """One run of ``schedulers`` (splitting ``bench.partitions``): N fires due at one second,
    clocked to the last confirm."""
    due = next_due(5 + count / 5_000 + (schedulers - 1) * 30)
    path = workdir / "burst.toml"
    path.write_text(schedules_text(count, burst_timing, due), encoding="utf-8")
    env = {"CRON_SCHEDULER_PARTITIONS": str(bench.partitions)}
    logs = [workdir / f"burst-{due:%H%M}-{n}.log" for n in range(schedulers)]
    fleet = [start_scheduler(bench, path, log, 120, **env) for log in logs]
    if bench.partitions > 1:
        until(lambda: spread_over(logs, bench.partitions), 120)
    if time.time() > due.timestamp() - 0.5:
        for process in fleet:
            reap(process)
        raise RuntimeError("the schedulers led too late for the burst; a margin is too short")
    time.sleep(max(due.timestamp() - 0.2 - time.time(), 0))
    before = sum(cpu_seconds(process.pid) for process in fleet)
    counters = [LineCounter(log, PUBLISHED) for log in logs]
    until(lambda: sum(c() for c in counters) >= count, 120 + count / 1000)
    used = sum(cpu_seconds(process.pid) for process in fleet) - before
    # Each line's ``late_ms`` is when its confirm came (the lines are written after them).
    last = max(float(event["late_ms"]) for log in logs for event in events(log, PUBLISHED))
    rss = max(reap(process)[1] for process in fleet)
    asyncio.run(reset(bench))
    return Run(last / 1000, count, used, rss)


async def raw_publish(bench: Bench, count: int) -> Run:
    """What most clients do: ``Exchange.publish`` per message, 500 confirms in flight."""
    connection = await aio_pika.connect(bench.url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        exchange = await channel.get_exchange(bench.names.tasks_exchange)
        window = asyncio.Semaphore(500)
        started = time.time()

        async def one(i: int) -> None:
            async with window:
                body = orjson.dumps({"task": "noop", "run_id": f"r{i}"})
                message = aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
                await exchange.publish(message, PLAN.key, mandatory=True)

        await asyncio.gather(*(one(i) for i in range(count)))
        seconds = time.time() - started
    await reset(bench)
    return Run(seconds, count)


@dataclass
class Idle:
    """The scheduler at rest with many schedules."""

    load_seconds: float
    cpu_percent: float
    rss_mb: float


def quiesce(pid: int, limit: float = 120) -> None:
    """Wait until a process used under 2% of a core over one second."""
    deadline = time.monotonic() + limit
    before = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(1)
        after = cpu_seconds(pid)
        if after - before < 0.02:
            return
        before = after
    raise TimeoutError("the scheduler never came to rest")


def idle_round(bench: Bench, count: int, seconds: float, workdir: Path) -> Idle:
    """Start on ``count`` schedules none due soon; CPU over ``seconds`` at rest, and RSS."""
    path = workdir / "idle.toml"
    path.write_text(schedules_text(count, idle_timing, datetime.now(UTC)), encoding="utf-8")
    log = workdir / f"idle-{int(time.time())}.log"
    started = time.time()
    process = start_scheduler(bench, path, log, 600)
    load = log_time(events(log, LEADING)[0]) - started
    quiesce(process.pid)
    before = cpu_seconds(process.pid)
    time.sleep(seconds)
    used = cpu_seconds(process.pid) - before
    rss = rss_mb(process.pid)
    reap(process)
    asyncio.run(reset(bench))
    return Idle(load, used / seconds * 100, rss)


def fire(args: argparse.Namespace, bench: Bench, workdir: Path) -> dict[str, Any]:
    """N fires due in the same second to confirmed, and the idle cost of many schedules."""
    bench.plan_keys.update(step.key for step in PLAN.suffixes())
    bench.partitions = args.partitions
    asyncio.run(reset(bench))
    ours: list[Run] = []
    raw: list[Run] = []
    idle: list[Idle] = []
    for index in range(args.rounds):
        if index % 2:
            raw.append(asyncio.run(raw_publish(bench, args.schedules)))
        ours.append(burst_round(bench, args.schedules, workdir, args.schedulers))
        if not index % 2:
            raw.append(asyncio.run(raw_publish(bench, args.schedules)))
        if args.idle_schedules:
            idle.append(idle_round(bench, args.idle_schedules, args.idle_seconds, workdir))
    idle = idle or [Idle(0, 0, 0)]  # --idle-schedules 0 leaves the idle part out
    print_fire(args, ours, raw, idle)
    return {
        "seconds": statistics.median(r.seconds for r in ours),
        "raw_seconds": statistics.median(r.seconds for r in raw),
        "cpu_us_per_fire": statistics.median(r.cpu_seconds / r.tasks * 1e6 for r in ours),
        "idle_cpu_percent": statistics.median(i.cpu_percent for i in idle),
        "rss_mb": statistics.median(i.rss_mb for i in idle),
        "load_seconds": statistics.median(i.load_seconds for i in idle),
    }


def print_fire(args: argparse.Namespace, ours: list[Run], raw: list[Run], idle: list[Idle]) -> None:
    """The ``fire`` tables."""
    print_table(
        f"fire {args.schedules:,} schedules due in the same second, {args.schedulers} "
        f"scheduler(s), {args.partitions} partition(s)",
        [
            ("due to last confirm s", [r.seconds for r in ours]),
            ("aio-pika publish+confirm s", [r.seconds for r in raw]),
            ("scheduler CPU µs/fire", [r.cpu_seconds / r.tasks * 1e6 for r in ours]),
            ("scheduler peak RSS MB", [r.peak_rss_mb for r in ours]),
        ],
    )
    print_table(
        f"at rest with {args.idle_schedules:,} schedules, none due for 10 min",
        [
            ("start to leading s", [i.load_seconds for i in idle]),
            (f"CPU % over {args.idle_seconds:g} s", [i.cpu_percent for i in idle]),
            ("RSS MB", [i.rss_mb for i in idle]),
        ],
    )


def add_command(sub: Any) -> None:
    """The ``fire`` subcommand and its options."""
    command = sub.add_parser("fire", help=fire.__doc__)
    command.add_argument("--schedules", type=int, default=10_000)
    command.add_argument("--idle-schedules", type=int, default=100_000)
    command.add_argument("--idle-seconds", type=float, default=20.0)
    command.add_argument("--schedulers", type=int, default=1, help="schedulers in the burst")
    command.add_argument(
        "--partitions", type=int, default=1, help="CRON_SCHEDULER_PARTITIONS of the burst"
    )
