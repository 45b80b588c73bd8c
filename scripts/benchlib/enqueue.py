"""``enqueue``: what a delayed enqueue costs against a plain one, through the same client.

One ``Client`` (one connection, confirms) sends ``--tasks`` tasks one after another, each
awaited, alternating per round between plain enqueues and enqueues delayed by an hour (held
in the delay levels, so no worker is involved). The first delayed enqueue of the process also
declares the 28 levels; its time is shown apart.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from benchlib.common import Bench, print_table
from warren_cron.client import Client
from warren_cron.runtime.settings import CronSettings

#: Held an hour: long enough that nothing reaches the main queue while the bench runs.
DELAY_SECONDS = 3600


async def timed(client: Client, count: int, delay: float | None) -> float:
    """Microseconds per enqueue over ``count`` enqueues, each awaited."""
    started = time.perf_counter()
    for _ in range(count):
        if delay is None:
            await client.enqueue("noop")
        else:
            await client.enqueue("noop", delay=delay)
    return (time.perf_counter() - started) / count * 1e6


async def rounds(bench: Bench, count: int, rounds: int) -> dict[str, Any]:
    """Interleaved rounds of plain and delayed enqueues on one client."""
    settings = CronSettings(amqp_url=bench.url, namespace=bench.names.namespace)
    bench.plan_keys.update(step.key for step in settings.default_plan().suffixes())
    async with Client(settings, name="warren-bench-enqueue") as client:
        started = time.perf_counter()
        await client.enqueue("noop", delay=DELAY_SECONDS)
        first_ms = (time.perf_counter() - started) * 1000
        plain, delayed = [], []
        for _ in range(rounds):
            plain.append(await timed(client, count, None))
            delayed.append(await timed(client, count, DELAY_SECONDS))
    ratios = [d / p for p, d in zip(plain, delayed, strict=True)]
    return {"plain": plain, "delayed": delayed, "ratios": ratios, "first_ms": first_ms}


def enqueue(args: Any, bench: Bench, workdir: Any) -> dict[str, Any]:
    """Plain vs delayed enqueue through one client: microseconds each, and their ratio."""
    result = asyncio.run(rounds(bench, args.tasks, args.rounds))
    print_table(
        f"enqueue {args.tasks:,} tasks one by one, {args.rounds} rounds",
        [
            ("plain, us per enqueue", result["plain"]),
            ("delayed 1 h, us per enqueue", result["delayed"]),
            ("delayed / plain", result["ratios"]),
            ("first delayed (28 levels), ms", [result["first_ms"]]),
        ],
    )
    return {
        "plain_us": statistics.median(result["plain"]),
        "delayed_us": statistics.median(result["delayed"]),
        "ratio": statistics.median(result["ratios"]),
        "first_delayed_ms": result["first_ms"],
    }


def add_command(sub: Any) -> None:
    """The ``enqueue`` subcommand and its options."""
    command = sub.add_parser("enqueue", help=enqueue.__doc__)
    command.add_argument("--tasks", type=int, default=2_000)
