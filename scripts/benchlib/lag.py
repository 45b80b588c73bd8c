"""``lag``: how late fires are published and started, with N schedules ``every = "1s"``.

A ``noop`` worker and the scheduler run for ``--seconds``; both logs are read afterwards:
scheduled time to publish confirmed (the ``late_ms`` of each ``fire published`` line) and
scheduled time to handler start (an ``attempt`` line's time minus its duration). Interval
schedules share the epoch anchor, so all N fire at the same instant every second; a second
contender spreads the same schedules' anchors over the second (``start_at`` offsets).

The floor: N messages written in one go at every whole second by the same batched publish
the scheduler uses, with no scheduler around it: what the broker alone takes to confirm them.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aio_pika
import orjson

from benchlib.common import Bench, LineCounter, log_time, print_table, reap
from benchlib.scheduling import (
    ATTEMPT,
    LEADING,
    PLAN,
    PUBLISHED,
    entry,
    events,
    reset,
    start_scheduler,
    start_worker,
)
from warren_cron.broker.batch import Sent, publish_batch
from warren_cron.codec import Outgoing, fire_outgoing
from warren_cron.faultkit.waits import until

#: Fires of the first seconds are left out: the processes are still warming up.
WARMUP_SECONDS = 3.0
KEYS = ("p50_ms", "p99_ms", "handler_p50_ms", "handler_p99_ms")


def lag_text(count: int, spread: bool) -> str:
    """``count`` schedules ``every = "1s"``, anchored together or spread over the second."""
    timings = [
        f'every = "1s"\nstart_at = 2020-01-01T00:00:00.{i * 1000 // count:03d}Z'
        if spread
        else 'every = "1s"'
        for i in range(count)
    ]
    return "\n".join(entry(f"s{i}", timing) for i, timing in enumerate(timings))


def percentile(values: list[float], share: float) -> float:
    """The value below which ``share`` of the values lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def fire_time(run_id: str) -> float:
    """Scheduled time of a fire, from its run id ``<schedule>@<UTC time>``."""
    return datetime.fromisoformat(run_id.rsplit("@", 1)[1]).timestamp()


def lags(
    scheduler_log: Path, worker_log: Path, window: tuple[float, float]
) -> tuple[list[float], list[float]]:
    """Publish-confirmed and handler-start lags in ms of the fires scheduled in ``window``."""
    first, last = window
    published = [
        float(event["late_ms"])
        for event in events(scheduler_log, PUBLISHED)
        if first <= fire_time(str(event["run_id"])) <= last
    ]
    started = []
    for event in events(worker_log, ATTEMPT):
        scheduled = fire_time(str(event["run_id"]))
        if first <= scheduled <= last:
            began = log_time(event) - float(event["duration_ms"]) / 1000
            started.append((began - scheduled) * 1000)
    return published, started


def figures(published: list[float], started: list[float]) -> dict[str, float]:
    """The percentiles reported for one round."""
    return {
        "p50_ms": percentile(published, 0.5),
        "p99_ms": percentile(published, 0.99),
        "handler_p50_ms": percentile(started, 0.5) if started else math.nan,
        "handler_p99_ms": percentile(started, 0.99) if started else math.nan,
    }


def ours_round(args: argparse.Namespace, bench: Bench, workdir: Path, spread: bool) -> Any:
    """Worker and scheduler for ``--seconds``; percentiles of both lags."""
    path = workdir / "lag.toml"
    path.write_text(lag_text(args.schedules, spread), encoding="utf-8")
    stamp = f"{int(time.time())}{'-spread' if spread else ''}"
    worker_log, scheduler_log = workdir / f"lag-w-{stamp}.log", workdir / f"lag-s-{stamp}.log"
    worker = start_worker(bench, worker_log, args.prefetch)
    split = {"CRON_SCHEDULER_PARTITIONS": str(args.partitions)}
    scheduler = start_scheduler(bench, path, scheduler_log, 60, **split)
    led = log_time(events(scheduler_log, LEADING)[0])
    time.sleep(args.seconds)
    reap(scheduler)
    # A worker that fell behind finishes what was published before it is stopped.
    published = LineCounter(scheduler_log, PUBLISHED)()
    attempts = LineCounter(worker_log, ATTEMPT)
    until(lambda: attempts() >= published, 120)
    reap(worker)
    asyncio.run(reset(bench))
    window = (led + WARMUP_SECONDS, led + args.seconds - 1)
    return figures(*lags(scheduler_log, worker_log, window))


def floor_round(args: argparse.Namespace, bench: Bench, workdir: Path) -> dict[str, float]:
    """The same load on the broker without the scheduler: a worker drains, a script publishes."""
    log = workdir / f"lag-floor-{int(time.time())}.log"
    worker = start_worker(bench, log, args.prefetch)
    try:
        result = asyncio.run(floor_publish(args, bench))
    finally:
        attempts = LineCounter(log, ATTEMPT)
        until(lambda: attempts() >= args.schedules * int(args.seconds), 120)
        reap(worker)
    asyncio.run(reset(bench))
    return result


async def floor_publish(args: argparse.Namespace, bench: Bench) -> dict[str, float]:
    """N messages in one write at every whole second; confirm lags of the broker alone."""
    confirmed: list[float] = []
    connection = await aio_pika.connect(bench.url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        first = math.ceil(time.time() + 1)
        for second in range(first, first + int(args.seconds)):
            messages = floor_messages(bench, args.schedules, second)
            await asyncio.sleep(second - time.time())
            stamps = await confirm_times(await publish_batch(channel, messages))
            if second >= first + WARMUP_SECONDS:
                confirmed += [(stamp - second) * 1000 for stamp in stamps]
    return figures(confirmed, [])


async def confirm_times(sent: Sent) -> list[float]:
    """When each confirm of a batch arrived (wall clock)."""
    stamps: list[float] = []
    for future in sent.futures:
        future.add_done_callback(lambda _: stamps.append(time.time()))
    await sent.confirmed(time.monotonic() + 30)
    return stamps


def floor_messages(bench: Bench, count: int, second: int) -> list[Outgoing]:
    """Messages the size of fires, for one second of the floor."""
    exchange = bench.names.tasks_exchange
    messages = []
    for i in range(count):
        run_id = f"s{i}@{datetime.fromtimestamp(second, UTC):%Y-%m-%dT%H:%M:%SZ}"
        body = orjson.dumps(
            {"task": "noop", "run_id": run_id, "schedule": "s", "scheduled_for": run_id[-20:]}
        )
        messages.append(fire_outgoing(exchange, PLAN.key, body, run_id, "s"))
    return messages


def lag(args: argparse.Namespace, bench: Bench, workdir: Path) -> dict[str, Any]:
    """Fire lag with N schedules every second: to publish confirmed and to handler start."""
    bench.plan_keys.update(step.key for step in PLAN.suffixes())
    bench.partitions = args.partitions
    asyncio.run(reset(bench))
    rounds: dict[str, list[dict[str, float]]] = {"ours": [], "spread": [], "floor": []}
    for _ in range(args.rounds):
        rounds["ours"].append(ours_round(args, bench, workdir, spread=False))
        rounds["floor"].append(floor_round(args, bench, workdir))
        rounds["spread"].append(ours_round(args, bench, workdir, spread=True))
    print_lag(args, rounds)
    result = {key: statistics.median(r[key] for r in rounds["ours"]) for key in KEYS}
    result["floor_p99_ms"] = statistics.median(r["p99_ms"] for r in rounds["floor"])
    result["spread_p99_ms"] = statistics.median(r["p99_ms"] for r in rounds["spread"])
    result["spread_handler_p99_ms"] = statistics.median(
        r["handler_p99_ms"] for r in rounds["spread"]
    )
    return result


def print_lag(args: argparse.Namespace, rounds: dict[str, list[dict[str, float]]]) -> None:
    """The ``lag`` table."""
    rows = []
    whats = ("publish p50", "publish p99", "handler p50", "handler p99")
    for name, label in (("ours", "same instant"), ("spread", "spread over 1s")):
        for key, what in zip(KEYS, whats, strict=True):
            rows.append((f"{label}: {what}", [r[key] for r in rounds[name]]))
    rows.append(("floor: confirm p50", [r["p50_ms"] for r in rounds["floor"]]))
    rows.append(("floor: confirm p99", [r["p99_ms"] for r in rounds["floor"]]))
    print_table(f"lag {args.schedules:,} schedules every 1s, ms after the scheduled time", rows)


def add_command(sub: Any) -> None:
    """The ``lag`` subcommand and its options."""
    command = sub.add_parser("lag", help=lag.__doc__)
    command.add_argument("--schedules", type=int, default=1_000)
    command.add_argument("--seconds", type=float, default=15.0)
    command.add_argument(
        "--partitions", type=int, default=1, help="CRON_SCHEDULER_PARTITIONS of the scheduler"
    )
