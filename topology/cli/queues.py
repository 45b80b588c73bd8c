"""Depth, consumers and age of the oldest message of every queue of CRON_NAMESPACE.

Read over AMQP only (no management plugin). The age is that of the head message, counted
from the latest time it carries (dead-lettering, failure, replay or schedule time), so it is
approximate. AMQP cannot list queues: the retry queues shown are those of the CRON_* default
plan, of ``--plan KEY`` and of every plan in the history of a failed task; the delay levels
are shown when they hold delayed tasks.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import asdict
from typing import Any

import orjson

from warren_cron.broker.connect import connect
from warren_cron.broker.depths import QueueRow, failed_plan_keys, queue_rows
from warren_cron.broker.inspect import counts
from warren_cron.cli.common import EXIT_BROKER, EXIT_OK, EXIT_USAGE, aligned
from warren_cron.cli.queues_args import parse_args
from warren_cron.durations import for_people
from warren_cron.errors import BrokerUnavailable, PlanError, SettingsError
from warren_cron.names import Names
from warren_cron.plan import RetryPlan, format_delay
from warren_cron.runtime.settings import CronSettings, load_settings


def human_age(seconds: float | None) -> str:
    """``45s``, ``12m3s``, ``2h5m``, ``3d4h``; ``-`` when unknown."""
    return "-" if seconds is None else for_people(int(seconds), parts=2)


async def report(settings: CronSettings, extra_plans: list[str]) -> list[QueueRow]:
    """Rows for the main, retry, failed and monitor queues that exist."""
    names = Names(settings.namespace)
    connection = await connect(settings, "warren-queues-script")
    async with connection:
        keys = {settings.default_plan().key, *extra_plans}
        if await counts(connection, names.failed_queue) is not None:
            keys |= await failed_plan_keys(connection, names)
        return await queue_rows(connection, names, settings.queue_type, keys)


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
        print(f"warren queues: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        rows = asyncio.run(report(settings, args.plan))
    except BrokerUnavailable as error:
        print(f"warren queues: {error}", file=sys.stderr)
        return EXIT_BROKER
    if not rows:
        print(
            f"warren queues: error: no queue of namespace {settings.namespace!r} on "
            f"{settings.safe_url}; check CRON_NAMESPACE and CRON_AMQP_URL",
            file=sys.stderr,
        )
        return EXIT_USAGE
    output: Any = [asdict(r) for r in rows]
    print(orjson.dumps(output, option=orjson.OPT_INDENT_2).decode() if args.json else table(rows))
    return EXIT_OK
