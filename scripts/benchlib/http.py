"""``http``: our worker running ``http`` tasks against a minimal aio-pika + aiohttp consumer.

Both call the same local endpoint (``benchlib.endpoint``, its own process, keep-alive, answers
``200 ok``) with the same prefetch. The baseline is the fastest honest thing: ``queue.consume``
with a callback that decodes the envelope with orjson, POSTs the payload's JSON with one shared
``aiohttp.ClientSession`` and acks. Ours is ``warren worker`` at INFO with JSON logs to a
file. Rounds are interleaved; each contender runs once per prefetch in each round.

    python -m benchlib.http URL QUEUE PREFETCH COUNT     # the baseline, as its own process
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aio_pika
import aiohttp
import orjson

from benchlib.common import (
    FLOW_ENV,
    ROOT,
    SEARCH_PATH,
    Bench,
    Run,
    int_list,
    open_queue,
    print_table,
    reap,
    run_baseline,
    run_ours,
)
from warren_cron.plan import RetryPlan

PLAN = RetryPlan((1000,))
JSON = {"Content-Type": "application/json"}


@contextmanager
def endpoint() -> Iterator[str]:
    """Start the endpoint as its own process; yield its URL; stop it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "benchlib.endpoint"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": SEARCH_PATH},
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        yield f"http://127.0.0.1:{int(process.stdout.readline())}/hook?source=bench"
    finally:
        reap(process)


def payload(url: str) -> dict[str, Any]:
    """The payload every task of both contenders carries."""
    return {"url": url, "json": {"event": "nightly", "items": [1, 2, 3]}}


def run_raw(bench: Bench, expected: int, prefetch: int) -> Run:
    """Start the baseline below as its own process."""
    command = ["-m", "benchlib.http", bench.url, bench.names.main_queue, str(prefetch)]
    return run_baseline([*command, str(expected)], expected)


async def raw_consumer(url: str, queue_name: str, prefetch: int, expected: int) -> None:
    """The baseline: consume, decode, POST the payload's JSON, read the answer, ack."""
    connection, queue = await open_queue(url, queue_name, prefetch)
    done = asyncio.Event()
    seen = 0
    first: list[float] = []
    async with aiohttp.ClientSession() as session:

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            nonlocal seen
            task = orjson.loads(message.body)["payload"]
            body = orjson.dumps(task["json"])
            async with session.post(task["url"], data=body, headers=JSON) as response:
                await response.read()
            await message.ack()
            seen += 1
            if seen == 1:
                first.append(time.time())
            if seen >= expected:
                done.set()

        await queue.consume(on_message)
        await done.wait()
        print(first[0], time.time(), flush=True)
    await connection.close()


def one_round(
    bench: Bench, args: argparse.Namespace, url: str, workdir: Path, index: int
) -> dict[tuple[str, int], Run]:
    """Each contender once per prefetch, the order alternating from round to round."""
    runs: dict[tuple[str, int], Run] = {}
    names = ("ours", "flow", "raw") if args.flow else ("ours", "raw")
    if index % 2:
        names = names[::-1]
    for prefetch in args.prefetches:
        for name in names:
            asyncio.run(bench.fill(args.tasks, "http", PLAN, payload(url)))
            if name == "raw":
                runs[name, prefetch] = run_raw(bench, args.tasks, prefetch)
            else:
                extra = FLOW_ENV if name == "flow" else None
                runs[name, prefetch] = run_ours(bench, args.tasks, prefetch, "", workdir, extra)
    return runs


def flow_table(rounds: list[dict[tuple[str, int], Run]], prefetch: int) -> dict[str, float]:
    """``--flow``: ours with the breaker and budget on against ours with them off."""
    off = [r["ours", prefetch] for r in rounds]
    on = [r["flow", prefetch] for r in rounds]
    each = [n.per_s / f.per_s for n, f in zip(on, off, strict=True)]
    cpu = [
        (n.cpu_seconds / n.tasks) / (f.cpu_seconds / f.tasks) for n, f in zip(on, off, strict=True)
    ]
    print_table(
        f"  breaker and budget on against off, prefetch {prefetch}",
        [
            ("on tasks/s", [r.per_s for r in on]),
            ("on CPU µs/task", [r.cpu_seconds / r.tasks * 1e6 for r in on]),
            ("ratio on/off tasks/s", each),
            ("ratio on/off CPU per task", cpu),
        ],
    )
    return {
        f"flow_ratio_{prefetch}": statistics.median(each),
        f"flow_cpu_ratio_{prefetch}": statistics.median(cpu),
    }


def http(args: argparse.Namespace, bench: Bench, workdir: Path) -> dict[str, Any]:
    """http tasks against a local endpoint: our worker against aio-pika + aiohttp."""
    bench.plan_keys.update(step.key for step in PLAN.suffixes())
    with endpoint() as url:
        rounds = [one_round(bench, args, url, workdir, i) for i in range(args.rounds)]
    result: dict[str, Any] = {}
    ratios: dict[int, float] = {}
    for prefetch in args.prefetches:
        ours = [r["ours", prefetch] for r in rounds]
        raw = [r["raw", prefetch] for r in rounds]
        each = [o.per_s / r.per_s for o, r in zip(ours, raw, strict=True)]
        print_table(
            f"http: {args.tasks:,} tasks to a local endpoint, prefetch {prefetch}",
            [
                ("ours tasks/s", [r.per_s for r in ours]),
                ("aio-pika + aiohttp tasks/s", [r.per_s for r in raw]),
                ("ratio ours/raw", each),
                ("ours CPU µs/task", [r.cpu_seconds / r.tasks * 1e6 for r in ours]),
                ("raw CPU µs/task", [r.cpu_seconds / r.tasks * 1e6 for r in raw]),
            ],
        )
        steady = [o.steady_per_s / r.steady_per_s for o, r in zip(ours, raw, strict=True)]
        print_table(
            "  the same from each one's first task to its last (start-up left out)",
            [
                ("ours tasks/s", [r.steady_per_s for r in ours]),
                ("aio-pika + aiohttp tasks/s", [r.steady_per_s for r in raw]),
                ("ratio ours/raw", steady),
            ],
        )
        result[f"steady_ratio_{prefetch}"] = statistics.median(steady)
        ratios[prefetch] = statistics.median(each)
        result[f"ours_per_s_{prefetch}"] = statistics.median(r.per_s for r in ours)
        result[f"raw_per_s_{prefetch}"] = statistics.median(r.per_s for r in raw)
        result[f"ratio_{prefetch}"] = ratios[prefetch]
        if args.flow:
            result.update(flow_table(rounds, prefetch))
    # The figure a check reads: the worse of the prefetches.
    result["ratio"] = min(ratios.values())
    return result


def add_command(sub: Any) -> None:
    """The ``http`` subcommand and its options."""
    command = sub.add_parser("http", help=http.__doc__)
    command.add_argument("--tasks", type=int, default=10_000)
    command.add_argument(
        "--prefetches",
        type=int_list,
        default=[32, 100],
        help="comma-separated prefetches to run at (default 32,100)",
    )
    command.add_argument(
        "--flow",
        action="store_true",
        help="also run ours with the circuit breaker and the retry budget on",
    )


if __name__ == "__main__":
    url, queue, prefetch, count = sys.argv[1:5]
    asyncio.run(raw_consumer(url, queue, int(prefetch), int(count)))
