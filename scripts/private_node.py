#!/usr/bin/env python3
"""Run a command against a private RabbitMQ node (or cluster) started for it, then remove it.

    python scripts/private_node.py --rabbitmq 4.3 -- pytest -m "not slow"
    python scripts/private_node.py --rabbitmq 3 --nodes 3 -- warren worker

The command gets ``CRON_TEST_AMQP_URL`` and ``CRON_AMQP_URL`` (every node, comma-separated)
and ``WARREN_RABBITMQ``, so the tests' own private nodes run the same release. The node is
removed whatever the command does, and its exit code is returned.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from warren_cron.faultkit.install import RELEASES, Install
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.private_cluster import PrivateCluster


def main(argv: list[str] | None = None) -> int:
    """Start the node(s), run the command, remove the node(s); the command's exit code."""
    parser = argparse.ArgumentParser(prog="private_node.py", description=__doc__)
    parser.add_argument(
        "--rabbitmq", choices=sorted(RELEASES), default="4.3", help="release (4 is 4.0)"
    )
    parser.add_argument("--nodes", type=int, default=1, help="1 node, or a cluster of N")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = [word for word in args.command if word != "--"] or ["true"]
    chosen = RELEASES[args.rabbitmq]
    base = Path(tempfile.mkdtemp(prefix="warren-node-"))
    install = Install.of(args.rabbitmq)
    made = PrivateCluster(base, args.nodes, install) if args.nodes > 1 else None
    node = made or PrivateBroker(base / "node", install)
    try:
        node.start()
        env = {
            **os.environ,
            "CRON_TEST_AMQP_URL": node.url.split(",")[0],
            "CRON_AMQP_URL": node.url,
            "WARREN_RABBITMQ": chosen,
        }
        print(f"private RabbitMQ {chosen} at {node.url}", file=sys.stderr, flush=True)
        return subprocess.call(command, env=env)
    finally:
        node.remove()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
