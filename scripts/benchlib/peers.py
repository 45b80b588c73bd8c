"""``peers``: warren's worker against the raw aio-pika consumer, Dramatiq and Celery, draining
the same number of pre-filled no-op tasks, each as its own process, rounds interleaved.

Each queue is filled first in its contender's wire format (``Bench.fill`` for warren and raw;
``actor.send`` and ``apply_async`` from the peer's own module, in a process of its own, then a
passive declare checks they all arrived), then the worker starts and is timed from its start to
the end of its last task: warren and raw as ``drain`` reads them; a peer's no-op task counts
itself and writes when its first and its last task ended to a file polled every 50 ms (the poll
only decides when to stop it). So a peer is timed to its last task's end, not to its ack (Celery
acks late right after; Dramatiq's worker thread hands the ack to its consumer thread); one that
leaves messages in its queue once stopped is reported on stderr. CPU is the process tree's
user+sys from ``wait4`` (Dramatiq's main process reaps its worker process). Start to first
task is shown for all but raw, which tells only when it finished.

Dramatiq: ``--processes 1``, default threads (8, prefetch 16), and again with
``dramatiq_queue_prefetch`` at ``--prefetch``. Celery: py-amqp (``amqp://``), ``--pool solo -O
fair``, ``worker_prefetch_multiplier`` at ``--prefetch``, ``task_acks_late``, gossip, mingle,
heartbeat and remote control off (``-O fair`` changes nothing with one process; on RabbitMQ
3.x Celery sets its prefetch channel-wide, the same with one consumer). Their modules go to a
folder of the run; every queue and exchange they declare is named in the run's namespace and
deleted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

from benchlib.common import Bench, Run, print_table, reap, run_ours
from warren_cron.faultkit.waits import until
from warren_cron.plan import RetryPlan

#: ``bench.py``'s ``run_raw``: it lives beside the raw consumer it starts.
RawRunner = Callable[[Bench, int, int], Run]

#: The counting every peer's task does: the end of the first and of the last task, to a file.
REPORT = """\
_TASKS = int(os.environ.get("PEER_TASKS", "0"))
_DONE = os.environ.get("PEER_DONE", "")
_count = itertools.count(1)  # next() on it is atomic under the GIL: dramatiq runs 8 threads
_first = [0.0]

def done_one():
    n = next(_count)
    if n == 1:
        _first[0] = time.time()
    if n == _TASKS:
        ended = time.time()
        with open(_DONE + ".tmp", "w") as file:
            file.write(f"{_first[0]} {ended}")
        os.replace(_DONE + ".tmp", _DONE)
"""

DRAMATIQ = Template('''\
"""Dramatiq's side of bench.py peers: a no-op actor on the run's queue."""
import itertools, os, sys, time
import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker
$report
broker = RabbitmqBroker(url=$url)
dramatiq.set_broker(broker)

@dramatiq.actor(queue_name=$queue)
def noop():
    done_one()

if __name__ == "__main__":
    for _ in range(int(sys.argv[1])):
        noop.send()
    broker.close()
''')

CELERY = Template('''\
"""Celery's side of bench.py peers: a no-op task on the run's queue, acked after it ran."""
import itertools, os, sys, time
from celery import Celery
$report
app = Celery("peer_celery", broker=$url)
app.conf.update(
    broker_connection_retry_on_startup=True,
    task_default_queue=$queue,
    task_default_exchange=$queue,
    task_default_routing_key=$queue,
    task_acks_late=True,
    task_ignore_result=True,
    worker_prefetch_multiplier=$prefetch,
    worker_enable_remote_control=False,
    control_exchange=$control,
    event_exchange=$events,
)

@app.task(name="noop")
def noop():
    done_one()

if __name__ == "__main__":
    with app.connection_for_write() as connection, connection.Producer() as producer:
        for _ in range(int(sys.argv[1])):
            noop.apply_async(producer=producer)
''')


@dataclass(frozen=True)
class PeerNames:
    """What the peers declare, in the run's namespace."""

    dramatiq: str
    celery: str
    control: str
    events: str
    queues: list[str]
    exchanges: list[str]


def peer_names(namespace: str) -> PeerNames:
    """The peers' queues and exchanges in ``namespace`` (Celery's control ones stay off)."""
    dramatiq, celery = f"{namespace}_dramatiq", f"{namespace}_celery"
    control, events = f"{celery}_control", f"{celery}_events"
    # Dramatiq adds a delay and a dead-letter queue; Celery a direct exchange of its own.
    queues = [dramatiq, f"{dramatiq}.DQ", f"{dramatiq}.XQ", celery]
    exchanges = [celery, events, f"{control}.pidbox", f"reply.{control}.pidbox"]
    return PeerNames(dramatiq, celery, control, events, queues, exchanges)


@dataclass(frozen=True)
class Peer:
    """One peer: its module (a file in the run's folder), its queue, its worker's argv."""

    module: str
    queue: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Setup:
    """What every round needs."""

    args: argparse.Namespace
    bench: Bench
    workdir: Path
    rundir: Path
    raw: RawRunner
    peers: dict[str, Peer]


def write_modules(rundir: Path, url: str, names: PeerNames, prefetch: int) -> None:
    """Write the peers' modules, the run's names in them, to the run's folder."""
    common = {"report": REPORT, "url": repr(url)}
    dramatiq = DRAMATIQ.substitute(common, queue=repr(names.dramatiq))
    (rundir / "peer_dramatiq.py").write_text(dramatiq, encoding="utf-8")
    celery = CELERY.substitute(
        common,
        queue=repr(names.celery),
        prefetch=prefetch,
        control=repr(names.control),
        events=repr(names.events),
    )
    (rundir / "peer_celery.py").write_text(celery, encoding="utf-8")


def peer_table(names: PeerNames, prefetch: int) -> dict[str, Peer]:
    """The peers by name: Dramatiq at its defaults and at ``prefetch``, Celery."""
    dramatiq = ["-m", "dramatiq", "peer_dramatiq", "--processes", "1"]
    celery = ["-m", "celery", "-A", "peer_celery", "-q", "worker", "--pool", "solo"]
    celery += ["-O", "fair", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    at_prefetch = {"dramatiq_queue_prefetch": str(prefetch)}
    return {
        "dramatiq": Peer("peer_dramatiq", names.dramatiq, dramatiq),
        "dramatiq_prefetch": Peer("peer_dramatiq", names.dramatiq, dramatiq, at_prefetch),
        "celery": Peer("peer_celery", names.celery, celery),
    }


def peer_env(rundir: Path, extra: dict[str, str]) -> dict[str, str]:
    """The caller's environment without dramatiq's knobs (defaults mean defaults), plus
    the run's folder on the path and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("dramatiq_")}
    return {**env, "PYTHONPATH": str(rundir), **extra}


async def ready_count(bench: Bench, queue: str) -> int:
    """Ready messages in ``queue``, by a passive declare."""
    connection = await bench.connection()
    async with connection:
        channel = await connection.channel()
        declared = await channel.declare_queue(queue, passive=True)
        return declared.declaration_result.message_count or 0


def fill_peer(setup: Setup, peer: Peer) -> None:
    """Publish ``--tasks`` tasks with the peer's own client, before its worker starts."""
    script = setup.rundir / f"{peer.module}.py"
    env = peer_env(setup.rundir, {})
    command = [sys.executable, str(script), str(setup.args.tasks)]
    subprocess.run(command, cwd=setup.rundir, env=env, check=True, timeout=600)
    # Its last publishes routed: a client without confirms may close before the broker has.
    tasks, queue = setup.args.tasks, peer.queue
    until(lambda: asyncio.run(ready_count(setup.bench, queue)) == tasks, 60, interval=0.05)


def run_peer(setup: Setup, name: str, peer: Peer) -> Run:
    """Start the peer's worker; clock from its start to its last task's end (its own time)."""
    stamp = f"{name}-{time.time_ns()}"
    done, log = setup.rundir / f"{stamp}.done", setup.rundir / f"{stamp}.log"
    tasks = setup.args.tasks
    env = peer_env(setup.rundir, {"PEER_TASKS": str(tasks), "PEER_DONE": str(done), **peer.env})
    with log.open("wb") as out:
        started = time.time()
        command = [sys.executable, *peer.argv]
        process = subprocess.Popen(command, cwd=setup.rundir, env=env, stdout=out, stderr=out)
        try:
            until(lambda: done.exists() or process.poll() is not None, 600, interval=0.05)
        finally:
            cpu, rss = reap(process)
    if not done.exists():
        raise RuntimeError(f"{name} exited {process.returncode} before its last task: {log}")
    first, ended = (float(t) for t in done.read_text().split())
    if left := asyncio.run(ready_count(setup.bench, peer.queue)):
        print(f"{name}: {left} messages left in its queue once stopped: {log}", file=sys.stderr)
    return Run(ended - started, tasks, cpu, rss, {"first_task_seconds": first - started})


def run_contender(setup: Setup, name: str) -> Run:
    """Fill the contender's queue, then run it."""
    args, bench = setup.args, setup.bench
    if name in ("warren", "raw"):
        asyncio.run(bench.fill(args.tasks, "noop", RetryPlan((1000,))))
        if name == "raw":
            return setup.raw(bench, args.tasks, args.prefetch)
        run = run_ours(bench, args.tasks, args.prefetch, "", setup.workdir)
        run.extra["first_task_seconds"] = run.seconds - run.extra["steady_seconds"]
        return run
    peer = setup.peers[name]
    fill_peer(setup, peer)
    return run_peer(setup, name, peer)


def one_round(setup: Setup, index: int, names: list[str]) -> dict[str, Run]:
    """One round: every contender once, the order turned by one each round."""
    turn = index % len(names)
    return {name: run_contender(setup, name) for name in names[turn:] + names[:turn]}


async def delete_peer_objects(bench: Bench, names: PeerNames) -> None:
    """Remove every queue and exchange the peers declared (missing ones are no error)."""
    connection = await bench.connection()
    async with connection:
        channel = await connection.channel()
        for queue in names.queues:
            await channel.queue_delete(queue)
        for exchange in names.exchanges:
            await channel.exchange_delete(exchange)


def report(runs: dict[str, list[Run]], labels: dict[str, str], title: str) -> dict[str, Any]:
    """Print the table; return the medians (and ratios warren/each) for ``--json``."""
    ours = runs["warren"]
    ratios = {
        name: [o.per_s / r.per_s for o, r in zip(ours, runs[name], strict=True)]
        for name in runs
        if name != "warren"
    }
    cpu = {name: [r.cpu_seconds / r.tasks * 1e6 for r in rs] for name, rs in runs.items()}
    first = {n: [r.extra["first_task_seconds"] for r in rs] for n, rs in runs.items() if n != "raw"}
    rows = [(f"{labels[n]} tasks/s", [r.per_s for r in rs]) for n, rs in runs.items()]
    rows += [(f"ratio warren/{labels[n]}", values) for n, values in ratios.items()]
    rows += [(f"{labels[n]} CPU µs/task", values) for n, values in cpu.items()]
    rows += [(f"{labels[n]} start to 1st s", values) for n, values in first.items()]
    print_table(title, rows)
    result: dict[str, Any] = {"ratio": statistics.median(ratios["raw"])}
    for name, rs in runs.items():
        result[f"{name}_per_s"] = statistics.median(r.per_s for r in rs)
        result[f"{name}_cpu_us_per_task"] = statistics.median(cpu[name])
        if name in first:
            result[f"{name}_first_task_s"] = statistics.median(first[name])
        if name in ratios:
            result[f"ratio_{name}"] = statistics.median(ratios[name])
    return result


def peers(args: argparse.Namespace, bench: Bench, workdir: Path, raw: RawRunner) -> dict[str, Any]:
    """warren's worker against raw aio-pika, Dramatiq and Celery, draining pre-filled no-ops."""
    names = peer_names(bench.names.namespace)
    rundir = workdir / f"peers-{bench.names.namespace}"
    rundir.mkdir(exist_ok=True)
    # A cluster's nodes come comma-separated: the peers connect to the first.
    write_modules(rundir, bench.url.split(",")[0], names, args.prefetch)
    setup = Setup(args, bench, workdir, rundir, raw, peer_table(names, args.prefetch))
    contenders = ["warren", "raw", *setup.peers]
    runs: dict[str, list[Run]] = {name: [] for name in contenders}
    try:
        for index in range(args.rounds):
            for name, run in one_round(setup, index, contenders).items():
                runs[name].append(run)
    finally:
        asyncio.run(delete_peer_objects(bench, names))
    p = args.prefetch
    labels = {"warren": "warren", "raw": "raw", "dramatiq": "dramatiq"}
    labels |= {"dramatiq_prefetch": f"dramatiq p{p}", "celery": "celery"}
    title = f"peers: drain {args.tasks:,} noop tasks, prefetch {p} (dramatiq: 8 threads, 16)"
    return report(runs, labels, title)


def add_command(sub: Any) -> None:
    """The ``peers`` subcommand and its options."""
    command = sub.add_parser("peers", help=peers.__doc__)
    command.add_argument("--tasks", type=int, default=20_000)
