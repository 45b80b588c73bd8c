"""Enqueue one task: ``warren enqueue TASK --payload JSON [--delay 90s | --at TIME]``.

Prints its run id once the broker confirmed it. A command line over ``topology.client``: the
retry plan comes from CRON_* settings unless --max-retries, --delay-ms or --multiplier say
otherwise; --delay and --at hold the task in the broker's delay levels until it is due.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import datetime, timedelta
from typing import Any

import orjson

from warren_cron.cli.common import (
    EXIT_BROKER,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_plan_options,
    plan_options,
)
from warren_cron.client import Client, Enqueued, EnqueueOptions
from warren_cron.delay import MAX_DELAY_SECONDS
from warren_cron.durations import parse_ms
from warren_cron.errors import BROKER_TROUBLE, ConfigError, TopologyError
from warren_cron.runtime.settings import CronSettings, load_settings

#: The broker is unreachable, refused the topology or failed during the publish: exit 3.
BROKER_ERRORS: tuple[type[BaseException], ...] = (TopologyError, *BROKER_TROUBLE)


def json_arg(text: str) -> Any:
    """Parse ``--payload``; argparse turns the error into a usage message."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"--payload is not valid JSON: {error}") from None


def duration_arg(text: str) -> timedelta:
    """Parse ``--delay`` or ``--ttl`` such as ``90s``, ``5m`` or ``1h30m``."""
    ms = parse_ms(text)
    if ms is None:
        raise argparse.ArgumentTypeError(f"{text!r} is no duration like 90s, 5m or 1h30m")
    if ms > MAX_DELAY_SECONDS * 1000:
        # Longer is past what a timedelta holds, and no task can wait that long anyway.
        raise argparse.ArgumentTypeError(
            f"{text!r} is longer than the longest delay, {MAX_DELAY_SECONDS} s (~8.5 years)"
        )
    return timedelta(milliseconds=ms)


def time_arg(text: str) -> datetime:
    """Parse ``--at``: ISO 8601 with a time zone (``Z`` or an offset)."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is no ISO 8601 time") from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone: add Z or +02:00")
    return when


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line of the script."""
    parser = argparse.ArgumentParser(
        prog="warren enqueue", description="Enqueue one task, now or later, and print its run id."
    )
    parser.add_argument("task", help="registered task name, e.g. http or noop")
    parser.add_argument("--payload", type=json_arg, default={}, help="task input as JSON")
    when = parser.add_mutually_exclusive_group()
    when.add_argument("--delay", type=duration_arg, help="run after this long, e.g. 90s or 2h")
    when.add_argument("--at", type=time_arg, help="run at this time, e.g. 2030-01-01T09:00Z")
    parser.add_argument("--ttl", type=duration_arg, help="past now + TTL it fails as expired")
    parser.add_argument("--key", help="idempotency key: a second enqueue with it sends nothing")
    add_plan_options(parser)
    parser.add_argument("--timeout", type=float, help="per-attempt timeout in seconds")
    return parser.parse_args(argv)


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
