"""Enqueue one task: ``warren enqueue TASK --payload JSON [--delay 90s | --at TIME]``.

Prints its run id once the broker confirmed it. A command line over ``topology.client``: the
retry plan comes from CRON_* settings unless --max-retries, --delay-ms or --multiplier say
otherwise; --delay and --at hold the task in the broker's delay levels until it is due.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from warren_cron.cli.common import EXIT_BROKER, EXIT_OK, EXIT_USAGE, UsageError, plan_options
from warren_cron.cli.enqueue_args import parse_args
from warren_cron.client import Client, Enqueued, EnqueueOptions
from warren_cron.errors import BROKER_TROUBLE, ConfigError, TopologyError
from warren_cron.runtime.settings import CronSettings, load_settings

#: The broker is unreachable, refused the topology or failed during the publish: exit 3.
BROKER_ERRORS: tuple[type[BaseException], ...] = (TopologyError, *BROKER_TROUBLE)


def options_of(args: argparse.Namespace, settings: CronSettings) -> EnqueueOptions:
    """The client's enqueue options from the command line."""
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    options = EnqueueOptions()
    plan = plan_options(args, settings)
    if plan is not None:
        options["plan"] = plan
    for name in ("at", "delay", "ttl", "key", "timeout"):
        if getattr(args, name) is not None:
            options[name] = getattr(args, name)
    return options


async def enqueue(
    settings: CronSettings, task: str, payload: Any, options: EnqueueOptions
) -> Enqueued:
    """Send the task with confirms, then close; bad options are refused before connecting."""
    # Not ``async with``: entering connects and declares the topology, and a usage error
    # must leave nothing behind on the broker.
    client = Client(settings, name="warren-enqueue")
    try:
        return await client.enqueue(task, payload, **options)
    finally:
        await client.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    try:
        settings = load_settings(CronSettings)
        done = asyncio.run(enqueue(settings, args.task, args.payload, options_of(args, settings)))
    except (ConfigError, UsageError) as error:
        print(f"warren enqueue: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except BROKER_ERRORS as error:
        print(f"warren enqueue: {error}", file=sys.stderr)
        return EXIT_BROKER
    print(done.run_id)
    if not done.created:
        print("warren enqueue: this key was enqueued before; nothing sent", file=sys.stderr)
    return EXIT_OK
