#!/usr/bin/env python3
"""Publish one task now: ``python scripts/enqueue.py TASK --payload JSON``; prints its run id.

The task's retry plan comes from CRON_* settings unless --max-retries, --delay-ms or
--multiplier say otherwise; its queues are declared before the confirmed, mandatory publish.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import orjson
from _cli import EXIT_BROKER, EXIT_OK, EXIT_USAGE, UsageError, add_plan_options, plan_options

from topology.broker.connect import connect, publish_channel
from topology.declare import declare_topology
from topology.envelope import Envelope, one_off_run_id, utcnow
from topology.errors import BrokerUnavailable, PlanError, SettingsError, TopologyError
from topology.names import Names
from topology.plan import RetryPlan
from topology.publish import TaskPublisher
from topology.runtime.settings import CronSettings, load_settings


def json_arg(text: str) -> Any:
    """Parse ``--payload``; argparse turns the error into a usage message."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"--payload is not valid JSON: {error}") from None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line of the script."""
    parser = argparse.ArgumentParser(
        prog="enqueue.py", description="Publish one task now and print its run id."
    )
    parser.add_argument("task", help="registered task name, e.g. http or noop")
    parser.add_argument("--payload", type=json_arg, default={}, help="task input as JSON")
    add_plan_options(parser)
    parser.add_argument("--timeout", type=float, help="per-attempt timeout in seconds")
    return parser.parse_args(argv)


def build_envelope(args: argparse.Namespace) -> Envelope:
    """The envelope of a one-off task."""
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    now = utcnow()
    return Envelope(
        task=args.task,
        payload=args.payload,
        run_id=one_off_run_id(args.task, now),
        scheduled_for=now,
        timeout_seconds=args.timeout,
    )


async def enqueue(settings: CronSettings, envelope: Envelope, plan: RetryPlan) -> None:
    """Declare the topology and the plan, then publish with confirms."""
    names = Names(settings.namespace)
    connection = await connect(settings, "warren-enqueue")
    async with connection:
        channel = await publish_channel(connection)
        topology = await declare_topology(channel, names, settings)
        publisher = TaskPublisher(channel, topology.tasks, names, settings.queue_type)
        await publisher.publish(envelope, plan)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    try:
        settings = load_settings(CronSettings)
        plan = plan_options(args, settings) or settings.default_plan()
        envelope = build_envelope(args)
    except (SettingsError, UsageError, PlanError) as error:
        print(f"enqueue.py: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        asyncio.run(enqueue(settings, envelope, plan))
    except (BrokerUnavailable, TopologyError) as error:
        print(f"enqueue.py: {error}", file=sys.stderr)
        return EXIT_BROKER
    print(envelope.run_id)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
