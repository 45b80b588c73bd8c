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

from topology.broker.connect import connect, publish_channel
from topology.declare import declare_topology
from topology.envelope import Envelope, one_off_run_id, utcnow
from topology.errors import BrokerUnavailable, PlanError, SettingsError, TopologyError
from topology.names import Names
from topology.plan import RetryPlan
from topology.publish import TaskPublisher
from topology.runtime.settings import CronSettings, load_settings

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_BROKER = 3


class UsageError(ValueError):
    """Bad command-line input."""


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
    parser.add_argument("--max-retries", type=int, help="retries after the first attempt")
    parser.add_argument("--delay-ms", type=int, help="delay before the first retry")
    parser.add_argument("--multiplier", type=float, help="growth of each further delay")
    parser.add_argument("--timeout", type=float, help="per-attempt timeout in seconds")
    return parser.parse_args(argv)


def build_plan(args: argparse.Namespace, settings: CronSettings) -> RetryPlan:
    """The plan from the options, falling back to the CRON_* defaults."""
    retries = settings.max_retries if args.max_retries is None else args.max_retries
    delay = settings.retry_delay_ms if args.delay_ms is None else args.delay_ms
    factor = settings.retry_delay_multiplier if args.multiplier is None else args.multiplier
    if not 0 <= retries <= 50 or delay < 0 or factor < 1:
        raise UsageError("need 0 <= --max-retries <= 50, --delay-ms >= 0 and --multiplier >= 1")
    return RetryPlan.exponential(retries, delay, factor, settings.retry_max_delay_ms)


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
        topology = await declare_topology(
            channel, names, settings.queue_type, settings.delivery_limit
        )
        publisher = TaskPublisher(channel, topology.tasks, names, settings.queue_type)
        await publisher.publish(envelope, plan)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    try:
        settings = load_settings(CronSettings)
        plan, envelope = build_plan(args, settings), build_envelope(args)
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
