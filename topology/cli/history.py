"""Run history: ``warren history [list]`` and ``warren history show RUN_ID``.

``list`` (the default) prints the newest runs, one line each; ``show`` the whole story of
one run. Both read the stream ``<ns>_history`` and change nothing. Exit codes: 0 done, 1 no
history stream in the namespace (or ``show`` found no event of the run), 2 usage error,
3 broker unreachable.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from datetime import datetime

import orjson
from aio_pika.abc import AbstractConnection

from warren_cron.broker.connect import connect
from warren_cron.broker.inspect import counts
from warren_cron.cli.common import (
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_USAGE,
    UsageError,
    log_to_stderr,
    run_command,
)
from warren_cron.cli.history_args import parse_args
from warren_cron.cli.history_view import runs_table, story
from warren_cron.errors import SettingsError
from warren_cron.failed.select import parse_since
from warren_cron.names import Names
from warren_cron.ops.runs import RunFilter, list_runs, run_events
from warren_cron.runtime.settings import CronSettings, load_settings


def since_of(args: argparse.Namespace) -> datetime | None:
    """``--since`` as a time (None when not given), after checking the other options."""
    if getattr(args, "limit", 1) < 1:
        raise UsageError("--limit must be at least 1")
    return parse_since(args.since) if args.since else None


def terminal_width() -> int | None:
    """Columns of the terminal (or ``$COLUMNS``); None when the output goes to a file or pipe."""
    if os.environ.get("COLUMNS") or sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return None


def dump(value: object) -> None:
    """Print indented JSON."""
    print(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


async def cmd_list(
    connection: AbstractConnection, stream: str, args: argparse.Namespace, since: datetime | None
) -> int:
    """Print the newest matching runs as a table or JSON."""
    assert since is not None  # list has a default
    which = RunFilter(schedule=args.schedule, outcome=args.outcome)
    runs = await list_runs(connection, stream, which, args.limit, since)
    if args.json:
        dump([run.summary() for run in runs])
    else:
        print(runs_table(runs, terminal_width()))
    more = " (--limit reached: older ones not shown)" if len(runs) == args.limit else ""
    print(f"{len(runs)} run(s) with events since {since:%Y-%m-%d %H:%M:%SZ}{more}", file=sys.stderr)
    return EXIT_OK


async def cmd_show(
    connection: AbstractConnection, stream: str, args: argparse.Namespace, since: datetime | None
) -> int:
    """Print one run and every event of it."""
    run = await run_events(connection, stream, args.run_id, since)
    if run is None:
        print(
            f"warren history: no events for run {args.run_id!r} (history keeps "
            "CRON_HISTORY_MAX_AGE; try --since)",
            file=sys.stderr,
        )
        return EXIT_PARTIAL
    if args.json:
        dump(run.story())
    else:
        print(story(run))
    return EXIT_OK


async def with_history(
    settings: CronSettings, args: argparse.Namespace, since: datetime | None
) -> int:
    """Run the command on the namespace's history stream, if it has one."""
    names = Names(settings.namespace)
    connection = await connect(settings, "warren-history-script")
    async with connection:
        if await counts(connection, names.history_stream) is None:
            print(
                f"warren history: there is no history stream {names.history_stream!r} on "
                f"{settings.safe_url}: nothing in CRON_NAMESPACE {settings.namespace!r} has "
                "written history yet (workers and the scheduler declare it when they start; "
                "check CRON_NAMESPACE)",
                file=sys.stderr,
            )
            return EXIT_PARTIAL
        command = cmd_show if args.command == "show" else cmd_list
        return await command(connection, names.history_stream, args, since)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    try:
        settings = load_settings(CronSettings)
        since = since_of(args)
    except (SettingsError, UsageError, ValueError) as error:
        print(f"warren history: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    log_to_stderr(settings.log_level)
    return run_command("warren history", with_history(settings, args, since))
