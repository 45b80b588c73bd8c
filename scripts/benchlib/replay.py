"""``replay``: moving failed records back to the tasks exchange, against a minimal loop.

Each round fills the failed queue with N failure records, as the worker writes them, then
times ``warren failed replay --all`` from process start to exit. Interleaved with
it, the same records are moved by a minimal loop (run as ``python -m benchlib.replay``):
``queue.iterator()`` at the same prefetch, each message published persistent, mandatory and
confirmed to the tasks exchange, then acked. Same guarantee, nothing else.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aio_pika

from benchlib.common import DEFAULTS, ROOT, SEARCH_PATH, Bench, Run, cron_env, print_table
from benchlib.scheduling import PLAN, PLAN_ENV
from warren_cron.clock import utcnow
from warren_cron.declare import declare_topology
from warren_cron.envelope import Envelope
from warren_cron.faultkit.processes import WARREN
from warren_cron.names import FAILED_KEY, Names
from warren_cron.records import Failure, envelope_record


async def fill_failed(bench: Bench, count: int) -> None:
    """Put ``count`` failure records in the failed queue, as the worker publishes them."""
    connection = await aio_pika.connect(bench.url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        topology = await declare_topology(channel, bench.names, DEFAULTS)
        failure = Failure("retries-exhausted", "RuntimeError: failed on purpose", 2)
        now = utcnow()
        for start in range(0, count, 500):
            records = []
            for i in range(start, min(start + 500, count)):
                envelope = Envelope(task="noop", run_id=f"f{i}", schedule="s", scheduled_for=now)
                record = envelope_record(envelope, failure, now)
                records.append(topology.dlx.publish(record, FAILED_KEY, mandatory=True))
            await asyncio.gather(*records)
        # The monitor's copies are not what is measured.
        await topology.monitor.purge()


async def empty_main(bench: Bench) -> int:
    """Purge the main queue; returns how many replayed tasks it held."""
    connection = await aio_pika.connect(bench.url)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(bench.names.main_queue, passive=True)
        count = queue.declaration_result.message_count or 0
        await queue.purge()
        return count


def run_process(args: list[str], bench: Bench, count: int) -> Run:
    """Run a mover to completion; clocked from start to exit, its CPU from wait4."""
    started = time.time()
    process = subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        env=cron_env(bench, **PLAN_ENV, CRON_LOG_LEVEL="WARNING", PYTHONPATH=SEARCH_PATH),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.time() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    errors = process.stderr.read().decode() if process.stderr else ""
    if process.returncode != 0:
        raise RuntimeError(f"{args[:2]} exited {process.returncode}: {errors[-2000:]}")
    moved = asyncio.run(empty_main(bench))
    if moved != count:
        raise RuntimeError(f"{args[:2]} moved {moved} of {count} records: {errors[-2000:]}")
    return Run(seconds, count, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def ours(bench: Bench, count: int) -> Run:
    """``warren failed replay --all``."""
    asyncio.run(fill_failed(bench, count))
    return run_process([WARREN, "failed", "replay", "--all"], bench, count)


def raw(bench: Bench, count: int, prefetch: int) -> Run:
    """The minimal consume-publish-confirm-ack loop below, as its own process."""
    asyncio.run(fill_failed(bench, count))
    loop = ["-m", "benchlib.replay", bench.url, bench.names.namespace, str(prefetch)]
    return run_process([*loop, str(count)], bench, count)


async def raw_loop(url: str, namespace: str, prefetch: int, count: int) -> None:
    """The baseline: consume the failed queue, publish each confirmed, then ack it."""
    names = Names(namespace)
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        await channel.set_qos(prefetch_count=prefetch)
        tasks = await channel.get_exchange(names.tasks_exchange)
        queue = await channel.declare_queue(names.failed_queue, passive=True)
        moved = 0
        async with queue.iterator() as messages:
            async for message in messages:
                copy = aio_pika.Message(
                    message.body,
                    headers=message.headers,
                    message_id=message.message_id,
                    content_type=message.content_type,
                    delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                )
                await tasks.publish(copy, PLAN.key, mandatory=True)
                await message.ack()
                moved += 1
                if moved == count:
                    break


def replay(args: argparse.Namespace, bench: Bench, workdir: Path) -> dict[str, Any]:
    """Failed-queue replay rate against a raw consume-publish-confirm-ack loop."""
    bench.plan_keys.update(step.key for step in PLAN.suffixes())
    runs: dict[str, list[Run]] = {"ours": [], "raw": []}
    for index in range(args.rounds):
        order = ("ours", "raw") if index % 2 == 0 else ("raw", "ours")
        for name in order:
            if name == "ours":
                runs[name].append(ours(bench, args.tasks))
            else:
                runs[name].append(raw(bench, args.tasks, args.prefetch))
    ratios = [o.per_s / r.per_s for o, r in zip(runs["ours"], runs["raw"], strict=True)]
    print_table(
        f"replay {args.tasks:,} failed records",
        [
            ("ours records/s", [r.per_s for r in runs["ours"]]),
            ("raw loop records/s", [r.per_s for r in runs["raw"]]),
            ("ratio ours/raw", ratios),
            ("ours CPU µs/record", [r.cpu_seconds / r.tasks * 1e6 for r in runs["ours"]]),
            ("raw CPU µs/record", [r.cpu_seconds / r.tasks * 1e6 for r in runs["raw"]]),
        ],
    )
    return {
        "ours_per_s": statistics.median(r.per_s for r in runs["ours"]),
        "raw_per_s": statistics.median(r.per_s for r in runs["raw"]),
        "ratio": statistics.median(ratios),
    }


def add_command(sub: Any) -> None:
    """The ``replay`` subcommand and its options."""
    command = sub.add_parser("replay", help=replay.__doc__)
    command.add_argument("--tasks", type=int, default=10_000)


if __name__ == "__main__":
    url, namespace, prefetch, count = sys.argv[1:5]
    asyncio.run(raw_loop(url, namespace, int(prefetch), int(count)))
