"""``bench.py scale``: tasks a second with 1, 2 and 4 worker processes, on one node and on a
three-node cluster, side by side in one run.

Both brokers are private nodes of the same release (``WARREN_RABBITMQ``) and settings,
started for the run and removed after it; every queue is a quorum queue, as a cluster needs.
On the cluster the workers are spread over the nodes (each is given every node, a different
one first), as a deployment would spread them. ``noop`` tasks measure the broker and the
worker's own cost; ``http`` tasks POST to the http benchmark's local endpoint
(``benchlib.endpoint``, its own process, answering ``200 ok`` at as little CPU as it can).
The clock runs from the first attempt to the last one, over every worker's log, so process
start-up is left out.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import orjson
from pydantic import JsonValue

from benchlib.common import (
    ATTEMPT_MARK,
    ROOT,
    Bench,
    LineCounter,
    log_time,
    print_table,
    reap,
    worker_env,
)
from benchlib.http import endpoint
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.private_cluster import PrivateCluster
from warren_cron.faultkit.waits import until
from warren_cron.plan import RetryPlan
from warren_cron.runtime.settings import CronSettings

QUORUM = CronSettings.model_construct(queue_type="quorum")
PLAN = RetryPlan((1000,))


def attempt_times(log: Path) -> list[float]:
    """Wall-clock times of every attempt line of a worker's log."""
    return [
        log_time(orjson.loads(line))
        for line in log.read_bytes().splitlines()
        if ATTEMPT_MARK in line
    ]


def rotated(urls: list[str], first: int) -> str:
    """The node list with node ``first`` first: where a worker connects."""
    return ",".join([*urls[first:], *urls[:first]])


def run_workers(bench: Bench, procs: int, tasks: int, workdir: Path) -> float:
    """Start ``procs`` workers on the filled queue; tasks a second, first to last attempt."""
    urls = bench.url.split(",")
    logs, started = [], []
    for index in range(procs):
        log = workdir / f"scale-{uuid.uuid4().hex[:6]}.log"
        env = worker_env(bench, 100, "")
        env["CRON_AMQP_URL"] = rotated(urls, index % len(urls))
        with log.open("wb") as out:
            started.append(
                subprocess.Popen(
                    [sys.executable, "-m", "warren_cron.worker"],
                    cwd=ROOT,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
        logs.append(log)
    counters = [LineCounter(log) for log in logs]
    until(lambda: sum(counter() for counter in counters) >= tasks, 900)
    for process in started:
        reap(process)
    times = sorted(t for log in logs for t in attempt_times(log))
    return tasks / (times[-1] - times[0])


def measure(url: str, kind: str, procs: int, tasks: int, target: str, workdir: Path) -> float:
    """Fill a fresh namespace on ``url`` with ``tasks`` tasks of ``kind``; drain it."""
    bench = Bench(url, QUORUM)
    payload: JsonValue = {"url": target} if kind == "http" else None
    try:
        asyncio.run(bench.fill(tasks, kind, PLAN, payload))
        return run_workers(bench, procs, tasks, workdir)
    finally:
        asyncio.run(bench.delete())


def compare(
    args: Any, one: str, three: str, kind: str, procs: int, target: str, workdir: Path
) -> dict[str, list[float]]:
    """``args.rounds`` rounds of one node against the cluster; print and return them."""
    tasks = args.tasks if kind == "noop" else args.http_tasks
    rounds = [
        (
            measure(one, kind, procs, tasks, target, workdir),
            measure(three, kind, procs, tasks, target, workdir),
        )
        for _ in range(args.rounds)
    ]
    print_table(
        f"{kind}: {tasks:,} tasks, {procs} worker process(es), quorum queues",
        [
            ("one node tasks/s", [a for a, _ in rounds]),
            ("3-node cluster tasks/s", [b for _, b in rounds]),
            ("ratio cluster/one", [b / a for a, b in rounds]),
        ],
    )
    return {"one": [a for a, _ in rounds], "cluster": [b for _, b in rounds]}


def scale(args: Any, _bench: Bench, workdir: Path) -> dict[str, Any]:
    """Tasks a second of noop and http tasks, 1/2/4 workers, one node against a cluster."""
    one = PrivateBroker(workdir / f"one-{uuid.uuid4().hex[:4]}")
    three = PrivateCluster(workdir / f"three-{uuid.uuid4().hex[:4]}")
    try:
        one.start()
        three.start()
        with endpoint() as target:
            return {
                f"{kind}_{procs}": compare(args, one.url, three.url, kind, procs, target, workdir)
                for kind in ("noop", "http")
                for procs in args.procs
            }
    finally:
        one.remove()
        three.remove()


def add_command(sub: Any) -> None:
    """The ``scale`` subcommand and its options."""
    command = sub.add_parser("scale", help=scale.__doc__)
    command.add_argument("--tasks", type=int, default=4000, help="noop tasks a measurement")
    command.add_argument("--http-tasks", type=int, default=1000, help="http tasks a measurement")
    command.add_argument(
        "--procs", type=lambda text: [int(n) for n in text.split(",")], default=[1, 2, 4]
    )
