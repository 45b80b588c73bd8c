#!/usr/bin/env python3
"""Depth, consumers and age of the oldest message of every queue of CRON_NAMESPACE.

Read over AMQP only (no management plugin). The age is that of the head message, counted
from the latest time it carries (dead-lettering, failure, replay or schedule time), so it is
approximate. AMQP cannot list queues: the retry queues shown are those of the CRON_* default
plan, of ``--plan KEY`` and of every plan in the history of a failed task.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import asdict, dataclass
from typing import Any

import orjson
from _cli import EXIT_BROKER, EXIT_OK, EXIT_USAGE, aligned
from aio_pika.abc import AbstractConnection

from topology.broker.connect import connect
from topology.broker.inspect import age_seconds, counts, holding, peek, plan_queues, retry_keys
from topology.durations import for_people
from topology.errors import BrokerUnavailable, PlanError, SettingsError
from topology.headers import H_ROUTING_KEY, text
from topology.names import FINAL_KEY, Names
from topology.plan import RetryPlan, format_delay
from topology.runtime.settings import CronSettings, load_settings

#: Failed records read to find the retry queues of older plans.
SCAN_LIMIT = 5000


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One line of the report."""

    queue: str
    role: str
    messages: int | None
    consumers: int | None
    oldest_seconds: float | None
    ttl_ms: int | None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line of the script."""
    parser = argparse.ArgumentParser(
        prog="queues.py",
        description="Show depth, consumers and oldest-message age of every queue of "
        "CRON_NAMESPACE, retry queues included, over AMQP.",
    )
    parser.add_argument("--json", action="store_true", help="a JSON array, for machines")
    parser.add_argument(
        "--plan",
        action="append",
        default=[],
        metavar="KEY",
        help="also show the retry queues of this plan, e.g. 30s-1m-2m (repeatable)",
    )
    return parser.parse_args(argv)


def human_age(seconds: float | None) -> str:
    """``45s``, ``12m3s``, ``2h5m``, ``3d4h``; ``-`` when unknown."""
    return "-" if seconds is None else for_people(int(seconds), parts=2)


async def failed_plan_keys(connection: AbstractConnection, names: Names) -> set[str]:
    """Plans named in the history of the failed records (read, never removed)."""
    keys: set[str] = set()
    async with holding(connection, names.failed_queue) as held:
        async for message in held.messages(SCAN_LIMIT):
            keys |= retry_keys(message.headers, names)
            routing = text((message.headers or {}).get(H_ROUTING_KEY, ""))
            keys |= {routing} if routing and routing != FINAL_KEY else set()
    return keys


async def row(
    connection: AbstractConnection, name: str, role: str, ttl_ms: int | None, look: bool
) -> QueueRow | None:
    """The row of one queue, or None when it does not exist."""
    found = await counts(connection, name)
    if found is None:
        return None
    age = await peek(connection, name, age_seconds) if look and found[0] else None
    return QueueRow(name, role, found[0], found[1], age, ttl_ms)


async def report(settings: CronSettings, extra_plans: list[str]) -> list[QueueRow]:
    """Rows for the main, retry, failed and monitor queues that exist."""
    names = Names(settings.namespace)
    connection = await connect(settings, "warren-queues-script")
    async with connection:
        keys = {settings.default_plan().key, *extra_plans}
        if await counts(connection, names.failed_queue) is not None:
            keys |= await failed_plan_keys(connection, names)
        # On quorum queues each look at the head counts toward CRON_DELIVERY_LIMIT, and the
        # main queue has a DLX: looking must not move a task on.
        look_main = settings.queue_type == "classic"
        planned: list[tuple[str, str, int | None, bool]] = [
            (names.main_queue, "main", None, look_main)
        ]
        for key, ttl in sorted(plan_queues(keys).items(), key=lambda item: item[1]):
            planned.append((names.retry_queue(key), "retry", ttl, True))
        planned += [(names.failed_queue, "failed", None, True)]
        planned += [(names.monitor_queue, "monitor", None, True)]
        rows = [await row(connection, *spec) for spec in planned]
    return [r for r in rows if r is not None]


def table(rows: list[QueueRow]) -> str:
    """Rows as an aligned text table."""
    head = ("QUEUE", "ROLE", "MESSAGES", "CONSUMERS", "OLDEST", "TTL")
    cells = [head] + [
        (
            r.queue,
            r.role,
            str(r.messages),
            str(r.consumers),
            human_age(r.oldest_seconds),
            format_delay(r.ttl_ms) if r.ttl_ms is not None else "-",
        )
        for r in rows
    ]
    return aligned(cells)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    try:
        settings = load_settings(CronSettings)
        for key in args.plan:
            RetryPlan.from_key(key)
    except (SettingsError, PlanError) as error:
        print(f"queues.py: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        rows = asyncio.run(report(settings, args.plan))
    except BrokerUnavailable as error:
        print(f"queues.py: {error}", file=sys.stderr)
        return EXIT_BROKER
    if not rows:
        print(
            f"queues.py: error: no queue of namespace {settings.namespace!r} on "
            f"{settings.safe_url}; check CRON_NAMESPACE and CRON_AMQP_URL",
            file=sys.stderr,
        )
        return EXIT_USAGE
    output: Any = [asdict(r) for r in rows]
    print(orjson.dumps(output, option=orjson.OPT_INDENT_2).decode() if args.json else table(rows))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
