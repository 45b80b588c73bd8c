"""Control schedules at run time: ``warren schedules list|trigger|pause|resume``, and
runtime schedules: ``create|update|archive|get`` (``topology/cli/schedules_store.py``).

``pause`` and ``resume`` append a command to the stream ``<ns>_control``, the durable pause
state, which whichever scheduler leads applies within a second, through restarts and
failover; ``trigger`` publishes one run now, as the scheduler would, paused or not. Each
writes its event to the history stream. Schedules come from CRON_SCHEDULES_FILE and the
broker's store of runtime schedules. Exit codes: 0 done (or nothing to do), 2 usage error,
unknown schedule or refused change, 3 broker trouble.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import orjson
from aio_pika.abc import AbstractConnection

from warren_cron.broker.connect import connect
from warren_cron.cli import schedules_apply, schedules_backfill
from warren_cron.cli import schedules_store as store
from warren_cron.cli.common import EXIT_OK, EXIT_USAGE, UsageError, log_to_stderr, run_command
from warren_cron.cli.schedules_args import parse_args
from warren_cron.clock import utcnow
from warren_cron.errors import ScheduleError, ScheduleNotFound, SettingsError
from warren_cron.history.events import who
from warren_cron.history.publisher import HistoryPublisher, publishing
from warren_cron.names import Names
from warren_cron.ops.schedule_actions import (
    live_schedule,
    pause_schedule,
    resume_schedule,
    trigger_schedule,
)
from warren_cron.ops.schedules import every_schedule
from warren_cron.runtime.settings import CronSettings, load_settings
from warren_cron.schedules.commands import describe
from warren_cron.schedules.control import Pause, read_pauses
from warren_cron.schedules.load import ScheduleSet, configured_schedules
from warren_cron.schedules.schedule import Schedule

#: An unknown name is answered with at most this many known ones.
NAMES_SHOWN = 50
Command = Callable[["Context", argparse.Namespace], Coroutine[Any, Any, int]]


class Context:
    """The settings and schedules a command works on."""

    def __init__(self, settings: CronSettings, schedules: ScheduleSet) -> None:
        self.settings = settings
        self.schedules = schedules
        self.names = Names(settings.namespace)

    async def resolve(self, name: str, connection: AbstractConnection) -> Schedule:
        """The file's schedule ``name``, else the live runtime one; else a usage error."""
        schedule = self.schedules.get(name)
        if schedule is not None:
            return schedule
        admin = await store.started(self.settings, connection)
        try:
            return await live_schedule(name, {}, admin, self.settings)
        except ScheduleNotFound:
            raise UsageError(
                f"no schedule {name!r} in {self.schedules.source} nor a live runtime one "
                f"(warren schedules list shows them); known: {known(self.schedules)}"
            ) from None
        finally:
            await admin.close()

    @asynccontextmanager
    async def broker(self) -> AsyncIterator[tuple[AbstractConnection, HistoryPublisher]]:
        """A connection and a history publisher on it, flushed when the block ends."""
        connection = await connect(self.settings, "warren-schedules-script")
        async with (
            connection,
            publishing(connection, self.names, self.settings, "schedules") as history,
        ):
            yield connection, history


def known(schedules: ScheduleSet) -> str:
    """The schedules' names, comma-separated; a long list is cut."""
    names = [s.name for s in schedules.schedules]
    if not names:
        return "none (the file has no schedule)"
    shown = ", ".join(names[:NAMES_SHOWN])
    more = len(names) - NAMES_SHOWN
    return shown + (f" ... and {more} more" if more > 0 else "")


def validate(args: argparse.Namespace, context: Context) -> None:
    """Check the command line before connecting, so usage errors exit 2 at once."""
    if args.command == "pause" and not args.reason.strip():
        raise UsageError("--reason must say why the schedule is paused")


async def cmd_trigger(context: Context, args: argparse.Namespace) -> int:
    """Publish one run of the schedule now, with its envelope and plan."""
    async with context.broker() as (connection, history):
        schedule = await context.resolve(args.name, connection)
        run = await trigger_schedule(connection, context.settings, schedule, history, who())
    print(run.run_id)
    return EXIT_OK


async def cmd_pause(context: Context, args: argparse.Namespace) -> int:
    """Pause the schedule, unless it is paused already."""
    async with context.broker() as (connection, history):
        name = (await context.resolve(args.name, connection)).name
        paused = await pause_schedule(
            connection, context.names, name, history, who(), args.reason.strip()
        )
    if paused.already is not None:
        print(f"{name} is already paused: {describe(paused.already)}; nothing sent")
    else:
        print(f"paused {name}: its fires are skipped until it is resumed")
    return EXIT_OK


async def cmd_resume(context: Context, args: argparse.Namespace) -> int:
    """Resume the schedule, unless it is not paused."""
    async with context.broker() as (connection, history):
        schedule = await context.resolve(args.name, connection)
        resumed = await resume_schedule(
            connection, context.names, schedule.name, history, who(), catch_up=args.catch_up
        )
    if not resumed.changed:
        print(f"{schedule.name} is not paused; nothing sent")
        return EXIT_OK
    missed = f"published under catch_up = {schedule.spec.catch_up}" if args.catch_up else "not run"
    print(f"resumed {schedule.name}: fires missed while paused are {missed}")
    return EXIT_OK


def table(found: list[dict[str, Any]], pauses: dict[str, Pause]) -> str:
    """Rows as an aligned text table; the pause, of any length, comes last."""
    cells = [("NAME", "SOURCE", "STATUS", "FIRES", "NEXT", "PAUSED")] + [
        (
            item["name"],
            item["source"],
            item["status"],
            item["fires"],
            item["next_fire_at"] or "-",
            describe(pauses[item["name"]]) if item["paused"] else "no",
        )
        for item in found
    ]
    widths = [max(len(line[i]) for line in cells) for i in range(5)]
    return "\n".join(
        "  ".join([*(c.ljust(w) for c, w in zip(line, widths, strict=False)), line[5]])
        for line in cells
    )


async def cmd_list(context: Context, args: argparse.Namespace) -> int:
    """Print each schedule, the file's then the runtime ones, with its next fire and pause."""
    async with context.broker() as (connection, _):
        pauses = await read_pauses(connection, context.names)
        admin = await store.started(context.settings, connection)
        rows = await every_schedule(
            context.schedules.schedules, admin, pauses, context.settings, utcnow(), sync=True
        )
    found = [item.row for item in rows]
    if args.json:
        print(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode())
    else:
        print(table(found, pauses))
    return EXIT_OK


COMMANDS: dict[str, Command] = {
    "list": cmd_list,
    "trigger": cmd_trigger,
    "pause": cmd_pause,
    "resume": cmd_resume,
    "create": store.cmd_create,
    "update": store.cmd_update,
    "archive": store.cmd_archive,
    "get": store.cmd_get,
    "apply": schedules_apply.cmd_apply,
    "backfill": schedules_backfill.cmd_backfill,
}


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    try:
        settings = load_settings(CronSettings)
        # Without a file of its own a deployment may still have runtime schedules.
        schedules = configured_schedules(settings) or ScheduleSet(str(settings.schedules_file), ())
        context = Context(settings, schedules)
        validate(args, context)
    except (SettingsError, ScheduleError, UsageError) as error:
        print(f"warren schedules: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    log_to_stderr(settings.log_level)
    try:
        return run_command("warren schedules", COMMANDS[args.command](context, args))
    except UsageError as error:
        print(f"warren schedules: error: {error}", file=sys.stderr)
        return EXIT_USAGE
