#!/usr/bin/env python3
"""Side-by-side benchmarks: warren's processes against minimal baselines, same run, same broker.

Each contender runs as its own process, interleaved over rounds; the table shows the median
with min-max. ``--json`` prints one JSON object last. Every run uses a namespace of its own
and deletes it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import functools
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aio_pika
import orjson
from benchlib import clients as clients_bench
from benchlib import dashboard as dashboard_bench
from benchlib import enqueue as enqueue_bench
from benchlib import fire as fire_bench
from benchlib import handover as handover_bench
from benchlib import http as http_bench
from benchlib import instructions as instructions_bench
from benchlib import lag as lag_bench
from benchlib import memory as memory_bench
from benchlib import peers as peers_bench
from benchlib import replay as replay_bench
from benchlib import runtime_schedules as schedules_bench
from benchlib import scale as scale_bench
from benchlib import startup as startup_bench
from benchlib import status as status_bench
from benchlib.common import (
    DEFAULT_URL,
    Bench,
    LineCounter,
    Run,
    open_queue,
    print_table,
    reached,
    reap,
    rss_mb,
    run_baseline,
    run_ours,
    worker_env,
)

import warren_cron
from warren_cron.faultkit.waits import until
from warren_cron.plan import RetryPlan

ROOT = Path(__file__).resolve().parent.parent


def run_raw(bench: Bench, expected: int, prefetch: int) -> Run:
    """Start the minimal aio-pika consumer below as its own process."""
    command = [__file__, "_raw", bench.url, bench.names.main_queue, str(prefetch)]
    return run_baseline([*command, str(expected)], expected)


async def raw_consumer(url: str, queue_name: str, prefetch: int, expected: int) -> None:
    """The baseline: ``queue.consume`` with a callback, orjson decode, ack per message."""
    connection, queue = await open_queue(url, queue_name, prefetch)
    done = asyncio.Event()
    seen = 0

    async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
        nonlocal seen
        orjson.loads(message.body)
        await message.ack()
        seen += 1
        if seen >= expected:
            done.set()

    await queue.consume(on_message)
    await done.wait()
    print(time.time(), flush=True)
    await connection.close()


# --- subcommands ----------------------------------------------------------------------------


def drain_round(
    bench: Bench, args: argparse.Namespace, workdir: Path, ours_first: bool
) -> dict[str, Run]:
    """One round: fill, run one contender, fill again, run the other."""
    runs: dict[str, Run] = {}
    order = ("ours", "raw") if ours_first else ("raw", "ours")
    for name in order:
        asyncio.run(bench.fill(args.tasks, "noop", RetryPlan((1000,))))
        if name == "ours":
            runs[name] = run_ours(bench, args.tasks, args.prefetch, "", workdir)
        else:
            runs[name] = run_raw(bench, args.tasks, args.prefetch)
    return runs


def drain(args: argparse.Namespace, bench: Bench, workdir: Path) -> dict[str, Any]:
    """Our worker against the raw consumer, draining the same pre-filled queue."""
    rounds = [drain_round(bench, args, workdir, i % 2 == 0) for i in range(args.rounds)]
    ours = [r["ours"] for r in rounds]
    raw = [r["raw"] for r in rounds]
    ratios = [o.per_s / r.per_s for o, r in zip(ours, raw, strict=True)]
    print_table(
        f"drain {args.tasks:,} noop tasks, prefetch {args.prefetch}",
        [
            ("ours tasks/s", [r.per_s for r in ours]),
            ("raw aio-pika tasks/s", [r.per_s for r in raw]),
            ("ratio ours/raw", ratios),
            ("ours CPU µs/task", [r.cpu_seconds / r.tasks * 1e6 for r in ours]),
            ("raw CPU µs/task", [r.cpu_seconds / r.tasks * 1e6 for r in raw]),
            ("ours peak RSS MB", [r.peak_rss_mb for r in ours]),
        ],
    )
    return {
        "ours_per_s": statistics.median(r.per_s for r in ours),
        "raw_per_s": statistics.median(r.per_s for r in raw),
        "ratio": statistics.median(ratios),
        "ours_cpu_us_per_task": statistics.median(r.cpu_seconds / r.tasks * 1e6 for r in ours),
        "ours_peak_rss_mb": statistics.median(r.peak_rss_mb for r in ours),
    }


def retry(args: argparse.Namespace, bench: Bench, workdir: Path) -> dict[str, Any]:
    """Tasks failing once then succeeding on a 1 ms plan, against success-only draining."""
    modules = "examples.bench_handlers"
    retry_runs, drain_runs = [], []
    for _ in range(args.rounds):
        asyncio.run(bench.fill(args.tasks, "fail_once", RetryPlan((1,))))
        retry_runs.append(run_ours(bench, 2 * args.tasks, args.prefetch, modules, workdir))
        asyncio.run(bench.fill(args.tasks, "noop", RetryPlan((1,))))
        drain_runs.append(run_ours(bench, args.tasks, args.prefetch, modules, workdir))
    ratios = [r.per_s / d.per_s for r, d in zip(retry_runs, drain_runs, strict=True)]
    print_table(
        f"retry {args.tasks:,} tasks (fail once, 1 ms plan)",
        [
            ("retry attempts/s", [r.per_s for r in retry_runs]),
            ("success-only tasks/s", [r.per_s for r in drain_runs]),
            ("ratio", ratios),
        ],
    )
    return {
        "attempts_per_s": statistics.median(r.per_s for r in retry_runs),
        "drain_per_s": statistics.median(r.per_s for r in drain_runs),
        "ratio": statistics.median(ratios),
    }


def soak(args: argparse.Namespace, bench: Bench, workdir: Path) -> dict[str, Any]:
    """Worker RSS after 10,000 tasks and after ``--tasks``, fed in batches while it runs."""
    log = workdir / "soak.log"
    asyncio.run(bench.fill(10_000, "noop", RetryPlan((1000,))))
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "warren_cron.worker"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=worker_env(bench, args.prefetch),
        )
        attempts = LineCounter(log)
        until(reached(attempts, 10_000), 600)
        early = rss_mb(process.pid)
        done = 10_000
        while done < args.tasks:
            batch = min(20_000, args.tasks - done)
            asyncio.run(bench.fill(batch, "noop", RetryPlan((1000,))))
            done += batch
            until(reached(attempts, done), 600)
        late = rss_mb(process.pid)
    reap(process)
    print_table(
        f"soak {args.tasks:,} tasks",
        [
            ("RSS MB after 10,000", [early]),
            (f"RSS MB after {args.tasks:,}", [late]),
            ("growth %", [(late / early - 1) * 100]),
        ],
    )
    return {"rss_10k_mb": early, "rss_end_mb": late, "rss_growth": late / early - 1}


COMMANDS: dict[str, Callable[[argparse.Namespace, Bench, Path], dict[str, Any]]] = {
    "drain": drain,
    "retry": retry,
    "soak": soak,
    "fire": fire_bench.fire,
    "handover": handover_bench.handover,
    "lag": lag_bench.lag,
    "replay": replay_bench.replay,
    "instructions": instructions_bench.instructions,
    "status": status_bench.status,
    "dashboard": dashboard_bench.dashboard,
    "enqueue": enqueue_bench.enqueue,
    "http": http_bench.http,
    "clients": clients_bench.clients,
    "scale": scale_bench.scale,
    "schedules": schedules_bench.schedules,
    "memory": memory_bench.memory,
    "startup": startup_bench.startup,
    # run_raw lives here, beside the raw consumer it starts.
    "peers": functools.partial(peers_bench.peers, raw=run_raw),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line."""
    parser = argparse.ArgumentParser(prog="bench.py", description=__doc__)
    parser.add_argument("--url", default=os.environ.get("CRON_AMQP_URL", DEFAULT_URL))
    parser.add_argument("--json", action="store_true", help="print one JSON object last")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prefetch", type=int, default=100)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, default in (("drain", 20_000), ("retry", 10_000), ("soak", 200_000)):
        command = sub.add_parser(name, help=COMMANDS[name].__doc__)
        command.add_argument("--tasks", type=int, default=default)
    for module in (
        fire_bench,
        lag_bench,
        replay_bench,
        instructions_bench,
        status_bench,
        dashboard_bench,
        enqueue_bench,
        http_bench,
        clients_bench,
        scale_bench,
        schedules_bench,
        memory_bench,
        startup_bench,
        handover_bench,
        peers_bench,
    ):
        module.add_command(sub)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run one benchmark and print its table (and JSON)."""
    if len(sys.argv) > 1 and sys.argv[1] == "_raw":
        url, queue, prefetch, expected = sys.argv[2:6]
        asyncio.run(raw_consumer(url, queue, int(prefetch), int(expected)))
        return 0
    args = parse_args(argv)
    # As an install does: the project's modules start from bytecode, as aio-pika's do, also
    # where PYTHONDONTWRITEBYTECODE keeps Python from writing it.
    for package in ("topology", "worker", "scheduler"):
        compileall.compile_dir(ROOT / package, quiet=1)
    # An editable install imports them through a folder of links of its own, and Python keeps
    # the bytecode beside the path it imported: without this every module of a short
    # process (a command) was compiled again at each start.
    compileall.compile_dir(Path(warren_cron.__file__).parent, quiet=1)
    bench = Bench(args.url)
    workdir = ROOT / ".bench"
    workdir.mkdir(exist_ok=True)
    try:
        result = COMMANDS[args.command](args, bench, workdir)
    finally:
        asyncio.run(bench.delete())
    if args.json:
        print(orjson.dumps({"command": args.command, **result}).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
