#!/usr/bin/env python3
"""Side-by-side benchmarks: warren's processes against minimal baselines, same run, same broker.

Each contender runs as its own process, interleaved over rounds; the table shows the median
with min-max. ``--json`` prints one JSON object last. Every run uses a namespace of its own
and deletes it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aio_pika
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from topology.declare import declare_topology  # noqa: E402 - after the path fix above
from topology.envelope import Envelope, utcnow  # noqa: E402
from topology.names import Names  # noqa: E402
from topology.plan import RetryPlan  # noqa: E402
from topology.publish import TaskPublisher  # noqa: E402

DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"
ATTEMPT_MARK = b'"event":"attempt"'


@dataclass
class Run:
    """What one contender did in one round."""

    seconds: float
    tasks: int
    cpu_seconds: float = 0.0
    peak_rss_mb: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def per_s(self) -> float:
        """Tasks (or attempts) per second."""
        return self.tasks / self.seconds


def summary(values: Sequence[float]) -> str:
    """``median (min-max)`` of one figure over the rounds."""
    return f"{statistics.median(values):,.1f} ({min(values):,.1f}-{max(values):,.1f})"


# --- the broker side ------------------------------------------------------------------------


class Bench:
    """A namespace of the benchmark's own on the broker."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.names = Names(f"bench_{uuid.uuid4().hex[:8]}")
        self.plan_keys: set[str] = set()

    async def fill(self, count: int, task: str, plan: RetryPlan) -> None:
        """Publish ``count`` persistent tasks, confirmed, before any consumer starts."""
        self.plan_keys.update(step.key for step in plan.suffixes())
        connection = await aio_pika.connect(self.url)
        async with connection:
            channel = await connection.channel()
            topology = await declare_topology(channel, self.names, "classic", 10)
            publisher = TaskPublisher(channel, topology.tasks, self.names, "classic")
            now = utcnow()
            for start in range(0, count, 500):
                await asyncio.gather(
                    *(
                        publisher.publish(
                            Envelope(task=task, run_id=f"b{i}", scheduled_for=now), plan
                        )
                        for i in range(start, min(start + 500, count))
                    )
                )

    async def delete(self) -> None:
        """Remove every queue and exchange of the namespace."""
        names = self.names
        queues = [names.main_queue, names.failed_queue, names.monitor_queue]
        queues += [names.retry_queue(key) for key in self.plan_keys]
        connection = await aio_pika.connect(self.url)
        async with connection:
            channel = await connection.channel()
            for queue in queues:
                await channel.queue_delete(queue)
            for exchange in (names.tasks_exchange, names.dlx, names.unrouted_exchange):
                await channel.exchange_delete(exchange)


# --- processes ------------------------------------------------------------------------------


def worker_env(bench: Bench, prefetch: int, modules: str = "") -> dict[str, str]:
    """Environment of ``python -m worker`` in the benchmark's namespace, INFO JSON logs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRON_")}
    env.update(
        CRON_AMQP_URL=bench.url,
        CRON_NAMESPACE=bench.names.namespace,
        CRON_PREFETCH=str(prefetch),
        CRON_LOG_LEVEL="INFO",
        CRON_LOG_FORMAT="json",
        CRON_HANDLER_MODULES=modules,
    )
    return env


def count_attempts(log: Path) -> int:
    """Attempt lines the worker wrote so far."""
    try:
        return log.read_bytes().count(ATTEMPT_MARK)
    except FileNotFoundError:
        return 0


def reached(log: Path, count: int) -> Callable[[], bool]:
    """A check that the worker logged at least ``count`` attempts."""
    return lambda: count_attempts(log) >= count


def last_attempt_time(log: Path) -> float:
    """Wall-clock time of the last attempt line in the log."""
    for line in reversed(log.read_bytes().splitlines()):
        if ATTEMPT_MARK in line:
            stamp = str(orjson.loads(line)["timestamp"]).replace("Z", "+00:00")
            return datetime.fromisoformat(stamp).timestamp()
    raise RuntimeError("no attempt in the log")


def reap(process: subprocess.Popen[bytes]) -> tuple[float, float]:
    """Stop a child, then return its CPU seconds and peak RSS in MB from wait4."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def run_ours(bench: Bench, expected: int, prefetch: int, modules: str, workdir: Path) -> Run:
    """Start ``python -m worker``; clock from process start to its last attempt line."""
    log = workdir / f"worker-{uuid.uuid4().hex[:6]}.log"
    with log.open("wb") as out:
        started = time.time()
        process = subprocess.Popen(
            [sys.executable, "-m", "worker"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=worker_env(bench, prefetch, modules),
        )
        wait_until(lambda: count_attempts(log) >= expected or process.poll() is not None, 600)
    ended = last_attempt_time(log)
    cpu, rss = reap(process)
    return Run(ended - started, expected, cpu, rss)


def run_raw(bench: Bench, expected: int, prefetch: int) -> Run:
    """Start the minimal aio-pika consumer below as its own process."""
    started = time.time()
    process = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "_raw",
            bench.url,
            bench.names.main_queue,
            str(prefetch),
            str(expected),
        ],
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    ended = float(process.stdout.readline())
    cpu, rss = reap(process)
    return Run(ended - started, expected, cpu, rss)


def wait_until(done: Callable[[], bool], timeout: float) -> None:
    """Poll ``done`` until it is true."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark did not finish in time")
        time.sleep(0.02)


async def raw_consumer(url: str, queue_name: str, prefetch: int, expected: int) -> None:
    """The baseline: ``queue.consume`` with a callback, orjson decode, ack per message."""
    connection = await aio_pika.connect(url)
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=prefetch)
    queue = await channel.declare_queue(queue_name, passive=True)
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


def rss_mb(pid: int) -> float:
    """Resident set size of a running process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def soak(args: argparse.Namespace, bench: Bench, workdir: Path) -> dict[str, Any]:
    """Worker RSS after 10,000 tasks and after ``--tasks``, fed in batches while it runs."""
    log = workdir / "soak.log"
    asyncio.run(bench.fill(10_000, "noop", RetryPlan((1000,))))
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "worker"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=worker_env(bench, args.prefetch),
        )
        wait_until(reached(log, 10_000), 600)
        early = rss_mb(process.pid)
        done = 10_000
        while done < args.tasks:
            batch = min(20_000, args.tasks - done)
            asyncio.run(bench.fill(batch, "noop", RetryPlan((1000,))))
            done += batch
            wait_until(reached(log, done), 600)
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


def print_table(title: str, rows: list[tuple[str, list[float]]]) -> None:
    """A small fixed-width table: figure, median (min-max)."""
    print(f"\n{title}")
    for label, values in rows:
        print(f"  {label:28} {summary(values)}")


COMMANDS: dict[str, Callable[[argparse.Namespace, Bench, Path], dict[str, Any]]] = {
    "drain": drain,
    "retry": retry,
    "soak": soak,
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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run one benchmark and print its table (and JSON)."""
    if len(sys.argv) > 1 and sys.argv[1] == "_raw":
        url, queue, prefetch, expected = sys.argv[2:6]
        asyncio.run(raw_consumer(url, queue, int(prefetch), int(expected)))
        return 0
    args = parse_args(argv)
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
