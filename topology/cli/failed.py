"""Inspect and recover failed tasks: ``warren failed list|show|replay|purge|export``.

The failed queue is the store of record: ``list``, ``show`` and ``export`` read it without
removing anything (records go back in order); only ``replay`` and ``purge`` take records
out, and only those matching the filters; each record they move or delete is written to the
run history (``warren history``). Exit codes: 0 all went well, 1 some records could not be moved
(or none matched, or the purge was declined), 2 usage error, 3 broker trouble.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from contextlib import aclosing
from typing import Any, TypeVar

import orjson
from aio_pika.abc import AbstractRobustConnection

from warren_cron.broker.connect import connect
from warren_cron.broker.inspect import counts
from warren_cron.cli.common import (
    EXIT_BROKER,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_USAGE,
    ProgressBar,
    UsageError,
    log_to_stderr,
    plan_options,
)
from warren_cron.cli.failed_args import build_parser, selection
from warren_cron.cli.failed_files import check_new_file, read_jsonl, write_jsonl
from warren_cron.cli.failed_view import full, shown_record, write_json, write_table
from warren_cron.declare import declare_topology
from warren_cron.errors import (
    BrokerUnavailable,
    PlanError,
    ScheduleError,
    SettingsError,
    TopologyError,
)
from warren_cron.failed.store import restore_records
from warren_cron.names import Names
from warren_cron.ops.failed import (
    Purge,
    Replay,
    each_listed,
    exported_records,
    own_plans,
    plan_picker,
    purge_records,
    replay_records,
    shown,
    summary,
)
from warren_cron.plan import RetryPlan
from warren_cron.records import FailedRecord
from warren_cron.runtime.settings import CronSettings, load_settings
from warren_cron.schedules.load import schedule_plans
from warren_cron.store.admin import ScheduleAdmin

T = TypeVar("T")
Command = Callable[[CronSettings, argparse.Namespace], Coroutine[Any, Any, int]]


def plans_of_schedules(settings: CronSettings) -> Mapping[str, RetryPlan] | None:
    """Each schedule's own retry plan from CRON_SCHEDULES_FILE; None when there is no file."""
    try:
        return schedule_plans(settings)
    except ScheduleError as error:
        raise UsageError(f"{error}\n(replay reads each schedule's retry plan from it)") from None


async def _own_plans(settings: CronSettings) -> dict[str, RetryPlan]:
    """Each schedule's own retry plan: the schedules file's and the store's runtime ones."""
    file = plans_of_schedules(settings)
    connection = await connect(settings, "warren-failed-script")
    async with connection:
        admin = ScheduleAdmin(settings)
        await admin.start(connection)
        try:
            return await own_plans(file, admin, settings, sync=True)
        finally:
            await admin.close()


async def _with_connection(
    settings: CronSettings,
    work: Callable[[AbstractRobustConnection, Names], Awaitable[T]],
    declare: bool = False,
) -> T:
    # Commands that only look (or remove) never create queues: a mistyped CRON_NAMESPACE
    # is an error, not a new empty namespace.
    connection = await connect(settings, "warren-failed-script")
    names = Names(settings.namespace)
    async with connection:
        if declare:
            channel = await connection.channel()
            await declare_topology(channel, names, settings)
            await channel.close()
        elif await counts(connection, names.failed_queue) is None:
            raise UsageError(
                f"there is no queue {names.failed_queue!r} on {settings.safe_url}; "
                "check CRON_NAMESPACE and CRON_AMQP_URL"
            )
        return await work(connection, names)


async def _read_matching(
    settings: CronSettings, args: argparse.Namespace, doing: str
) -> list[FailedRecord]:
    """The records the filters select (at most ``--limit``), read with a progress bar."""
    bar = ProgressBar(doing)
    try:
        return await _with_connection(
            settings,
            lambda conn, names: exported_records(conn, names, selection(args), args.limit, bar),
        )
    finally:
        bar.close()


async def cmd_list(settings: CronSettings, args: argparse.Namespace) -> int:
    """Print the matching records as a table or JSON, each as soon as it is read."""

    async def show(connection: AbstractRobustConnection, names: Names) -> int:
        records = each_listed(connection, names, selection(args), args.limit)
        async with aclosing(records):
            write = write_json if args.json else write_table
            return await write(records, sys.stdout)

    count = await _with_connection(settings, show)
    print(f"{count} matching record(s)", file=sys.stderr)
    return EXIT_OK


async def cmd_show(settings: CronSettings, args: argparse.Namespace) -> int:
    """Print every record of one run id in full."""
    records = await _with_connection(settings, lambda conn, names: shown(conn, names, args.run_id))
    if not records:
        print(f"warren failed: no failed record with run id {args.run_id!r}", file=sys.stderr)
        return EXIT_PARTIAL
    if args.json:
        whole = [shown_record(r) for r in records]
        print(orjson.dumps(whole, option=orjson.OPT_INDENT_2).decode())
    else:
        print("\n\n".join(full(record) for record in records))
    return EXIT_OK


async def cmd_export(settings: CronSettings, args: argparse.Namespace) -> int:
    """Write the matching records as JSON Lines; the queue keeps them."""
    records = await _read_matching(settings, args, "exporting")
    write_jsonl(args.out, records)
    print(f"exported {len(records)} record(s) to {args.out}", file=sys.stderr)
    return EXIT_OK


def confirm(count: int, queue: str, export: str | None) -> bool:
    """Ask on the terminal before records are deleted."""
    kept = f" (saved to {export} first)" if export else " (no export: this cannot be undone)"
    print(f"purge {count} record(s) from {queue}{kept}? [y/N] ", end="", file=sys.stderr)
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


async def cmd_purge(settings: CronSettings, args: argparse.Namespace) -> int:
    """Delete the matching records, after confirmation and the export if asked."""
    select, names = selection(args), Names(settings.namespace)
    limit = args.limit
    if not args.yes:
        counted = Purge(select, limit, dry_run=True)
        found = await _with_connection(
            settings, lambda conn, _: purge_records(conn, settings, counted)
        )
        if not found.matched:
            print("nothing matches: nothing purged", file=sys.stderr)
            return EXIT_OK
        if not confirm(found.matched, names.failed_queue, args.export):
            print("not confirmed: nothing purged", file=sys.stderr)
            return EXIT_PARTIAL
        limit = found.matched  # never more than the user agreed to
    bar = ProgressBar("purging")
    export = (lambda records: write_jsonl(args.export, records)) if args.export else None

    # Each record removed is written to the run history as it goes.
    purge = Purge(select, limit, progress=bar, export=export)
    tally = await _with_connection(settings, lambda conn, _: purge_records(conn, settings, purge))
    bar.close()
    print(summary(tally, "purge"), file=sys.stderr)
    return EXIT_OK


async def cmd_replay(settings: CronSettings, args: argparse.Namespace) -> int:
    """Move the matching records back to the tasks exchange with a fresh retry plan."""
    override = plan_options(args, settings)
    plans = None if override else await _own_plans(settings)
    bar = ProgressBar("replaying")
    replay = Replay(
        select=selection(args),
        plan_for=plan_picker(settings.default_plan(), plans, override),
        limit=args.limit,
        dry_run=args.dry_run,
        rate=args.rate,
        reconnect_seconds=args.reconnect_seconds,
        progress=bar,
    )
    tally = await replay_records(settings, replay)
    bar.close()
    print(summary(tally, "replay", args.dry_run), file=sys.stderr)
    for error in tally.errors[:20]:
        print(f"  {error}", file=sys.stderr)
    missed = tally.moved < tally.matched and not args.dry_run
    return EXIT_PARTIAL if tally.failed or tally.errors or missed else EXIT_OK


async def cmd_restore(settings: CronSettings, args: argparse.Namespace) -> int:
    """Publish the records of an export file back into the failed queue."""
    exported = read_jsonl(args.file)
    count = await _with_connection(
        settings, lambda conn, names: restore_records(conn, names, exported), declare=True
    )
    print(f"restored {count} record(s) to the failed queue", file=sys.stderr)
    return EXIT_OK


COMMANDS: dict[str, Command] = {
    "list": cmd_list,
    "show": cmd_show,
    "replay": cmd_replay,
    "purge": cmd_purge,
    "export": cmd_export,
    "restore": cmd_restore,
}


def validate(args: argparse.Namespace, settings: CronSettings) -> None:
    """Check the whole command line before connecting, so usage errors exit 2 at once."""
    selection(args)
    if args.command == "replay":
        if plan_options(args, settings) is None:
            plans_of_schedules(settings)
        if args.rate is not None and args.rate <= 0:
            raise UsageError("--rate must be a positive number of records a second")
    check_new_file(getattr(args, "out", None) or getattr(args, "export", None))
    if args.command == "restore":
        read_jsonl(args.file)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        # The scheduler's settings: replay reads each schedule's plan from its file.
        settings = load_settings(CronSettings)
        validate(args, settings)
    except (SettingsError, UsageError, PlanError, ValueError) as error:
        print(f"warren failed: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    log_to_stderr(settings.log_level)
    try:
        return asyncio.run(COMMANDS[args.command](settings, args))
    except UsageError as error:
        print(f"warren failed: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (BrokerUnavailable, TopologyError) as error:
        print(f"warren failed: {error}", file=sys.stderr)
        return EXIT_BROKER
