#!/usr/bin/env python3
"""Chaos run: ``python scripts/chaos.py --tasks N`` proves that no task is lost while things break.

It starts a RabbitMQ node of its own (from the installed ``rabbitmq-server``, or 4.0 with
``WARREN_RABBITMQ=4``; the machine's broker is never touched), or with ``--cluster N`` a
cluster of N such nodes whose every URL the processes are given, worker processes running a
ledger handler that records every attempt in SQLite, and publishes N tasks (default 10,000):
most succeed, a share fails transiently and recovers, a share fails for good, a share exhausts
its retries. Meanwhile a driver, seeded and printed so a run can be repeated, kills and stops
workers, closes every connection, restarts the broker and kills it. When the work is done the
run goes quiet without faults and prints the ledger table: lost, completed, failed, duplicated.

Exit codes: 0 nothing lost, 1 a task was lost, unaccounted for or duplicated without a
cause, or a worker exited non-zero on SIGTERM; 2 usage error; 3 no RabbitMQ to run.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
from pathlib import Path

from warren_cron.broker.connect import connect
from warren_cron.faultkit.driver import FAULTS, UNSAFE_ON_CLASSIC, Chaos, ChaosConfig, ChaosResult
from warren_cron.faultkit.install import available
from warren_cron.faultkit.ledger import Ledger
from warren_cron.faultkit.namespace import BrokerNamespace
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.private_cluster import PrivateCluster
from warren_cron.faultkit.processes import Procs, base_env
from warren_cron.faultkit.scenario import Scenario
from warren_cron.plan import RetryPlan
from warren_cron.runtime.chatter import demote_reconnect_chatter
from warren_cron.runtime.settings import CronSettings

EXIT_OK = 0
EXIT_LOST = 1
EXIT_USAGE = 2
EXIT_NO_BROKER = 3
NAMESPACE = "chaos"


def fault_list(text: str) -> tuple[str, ...]:
    """Parse ``--faults``: comma-separated names from FAULTS."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = sorted(set(names) - set(FAULTS))
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown fault(s) {', '.join(unknown) or '(none given)'}; choose from "
            f"{', '.join(FAULTS)}"
        )
    return names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line of the chaos run."""
    parser = argparse.ArgumentParser(
        prog="chaos.py",
        description="Run N tasks on a private RabbitMQ node while workers, connections and "
        "the broker are broken at random; print the ledger; exit 1 if anything was lost.",
    )
    parser.add_argument("--tasks", type=int, default=10_000, help="tasks to publish")
    parser.add_argument("--workers", type=int, default=3, help="worker processes")
    parser.add_argument("--seed", type=int, help="seed of the workload and the driver")
    parser.add_argument(
        "--queue-type",
        choices=["quorum", "classic"],
        default="quorum",
        help="quorum (default) or classic; classic runs leave out restart-broker and kill-broker",
    )
    parser.add_argument(
        "--faults", type=fault_list, default=tuple(FAULTS), help="comma-separated faults"
    )
    parser.add_argument(
        "--pause",
        type=float,
        nargs=2,
        default=(1.0, 4.0),
        metavar=("MIN", "MAX"),
        help="seconds between two faults, drawn between MIN and MAX",
    )
    parser.add_argument(
        "--rate", type=float, default=50.0, help="tasks published a second (default 50)"
    )
    parser.add_argument(
        "--cluster",
        type=int,
        default=1,
        metavar="N",
        help="run on a private cluster of N nodes (quorum queues; broker faults hit one "
        "node at a time); default 1, a single node",
    )
    parser.add_argument("--keep", action="store_true", help="keep the ledger, logs and node")
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.workers < 1 or args.rate <= 0:
        parser.error("need --tasks >= 1, --workers >= 1 and --rate > 0")
    if not 0 < args.pause[0] <= args.pause[1]:
        parser.error("--pause needs 0 < MIN <= MAX")
    if not 1 <= args.cluster <= 5:
        parser.error("--cluster needs 1 to 5 nodes")
    if args.cluster > 1 and args.queue_type != "quorum":
        parser.error("--cluster needs quorum queues: a classic queue lives on one node only")
    return args


async def experiment(
    node: PrivateBroker | PrivateCluster, workdir: Path, config: ChaosConfig, queue: str
) -> ChaosResult:
    """Prepare the namespace on the node (or cluster), then run the chaos."""
    connection = await connect(CronSettings(amqp_url=node.url), "chaos", log_outages=False)
    ledger = Ledger(workdir / "ledger.sqlite")
    (workdir / "logs").mkdir()
    procs = Procs(workdir / "logs", base_env(node.url, NAMESPACE, ledger.path, queue))
    broker = BrokerNamespace(node.url, NAMESPACE, connection)
    broker.queue_type = "quorum" if queue == "quorum" else "classic"
    scenario = Scenario(node, broker, ledger, procs, plan=RetryPlan((200, 400)))
    try:
        await scenario.prepare()
        return await Chaos(scenario, config).run()
    finally:
        procs.kill_all()
        await scenario.close()
        await connection.close()
        ledger.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    # The run's own connections see every broker fault: the client libraries' reports of
    # each loss would bury the table (the workers' logs keep theirs).
    demote_reconnect_chatter()
    if not available():
        print(
            "chaos.py: rabbitmq-server is not installed; it needs a node of its own",
            file=sys.stderr,
        )
        return EXIT_NO_BROKER
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    faults = tuple(
        f for f in args.faults if args.queue_type == "quorum" or f not in UNSAFE_ON_CLASSIC
    )
    config = ChaosConfig(
        tasks=args.tasks,
        workers=args.workers,
        seed=seed,
        pause=tuple(args.pause),
        faults=faults,
        rate=args.rate,
    )
    workdir = Path(tempfile.mkdtemp(prefix="warren-chaos-"))
    print(
        f"chaos: seed {seed}, {args.tasks} tasks, {args.workers} workers, "
        f"{args.queue_type} queues, {args.cluster} node(s), "
        f"faults {','.join(faults) or 'none'}; files in {workdir}",
        flush=True,
    )
    node: PrivateBroker | PrivateCluster = (
        PrivateCluster(workdir / "rabbitmq", args.cluster)
        if args.cluster > 1
        else PrivateBroker(workdir / "rabbitmq")
    )
    try:
        node.start()
        result = asyncio.run(experiment(node, workdir, config, args.queue_type))
    finally:
        if not args.keep:
            node.remove()
    print(result.table())
    if result.ok:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        print(f"chaos: OK, nothing lost (seed {seed})")
        return EXIT_OK
    print(f"chaos: FAILED (seed {seed}); ledger and logs kept in {workdir}")
    return EXIT_LOST


if __name__ == "__main__":
    sys.exit(main())
