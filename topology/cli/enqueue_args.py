"""``warren enqueue``'s command line, with what it parses: nothing heavier than the standard
library and orjson, so that ``warren enqueue --help`` and a usage error answer at once."""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta
from typing import Any

import orjson

from warren_cron.cli.usage import add_plan_options
from warren_cron.durations import parse_ms
from warren_cron.names import MAX_DELAY_SECONDS


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


def build_parser() -> argparse.ArgumentParser:
    """The command line: a task, its payload, when, and the options of its retry plan."""
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
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line of the script."""
    return build_parser().parse_args(argv)
