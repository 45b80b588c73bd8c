"""The command line of ``warren failed``: subcommands, their options, and the filters.

Building the parser needs the standard library alone, so that ``warren failed --help``
answers at once; the filters' own module loads when a command is read into one."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TypeAlias

from warren_cron.cli.usage import UsageError, add_plan_options

if TYPE_CHECKING:
    from warren_cron.failed.select import RecordFilter

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _filters(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("filters (patterns may use * and ?)")
    group.add_argument("--schedule", help="schedule name, e.g. 'billing-*'")
    group.add_argument("--task", help="task name, e.g. http")
    group.add_argument("--reason", help="exact reason, e.g. retries-exhausted, unknown-task")
    group.add_argument("--since", help="failed at or after: an age (30m, 2h, 7d) or ISO time")
    group.add_argument("--run-id", help="run id, e.g. 'nightly@2026-01-31*'")
    group.add_argument("--text", help="text in the run id, schedule, task, reason or error")
    group.add_argument("--limit", type=int, help="handle at most this many matching records")


def _plan_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "retry plan (default: the schedule's own plan, the file's or a runtime one's, else the "
        "CRON_* defaults)"
    )
    add_plan_options(group)


def _reading(sub: Subcommands) -> None:
    listing = sub.add_parser("list", help="table of failed tasks (nothing is removed)")
    _filters(listing)
    listing.add_argument("--json", action="store_true", help="a JSON array, for machines")
    show = sub.add_parser("show", help="everything about the records of one run id")
    show.add_argument(
        "run_id", metavar="RUN_ID", help="the run id as it is: * and ? in it are no pattern"
    )
    show.add_argument("--json", action="store_true", help="the records as JSON")
    export = sub.add_parser("export", help="write matching records as JSON Lines")
    _filters(export)
    export.add_argument("--out", metavar="FILE", required=True, help="new file, or - for stdout")


def _moving(sub: Subcommands) -> None:
    replay = sub.add_parser("replay", help="move matching records back to the tasks exchange")
    _filters(replay)
    _plan_options(replay)
    replay.add_argument("--all", action="store_true", help="replay every record")
    replay.add_argument("--dry-run", action="store_true", help="count, move nothing")
    replay.add_argument("--rate", type=float, help="at most this many records a second")
    replay.add_argument(
        "--reconnect-seconds", type=float, default=60.0, help="wait this long for a lost broker"
    )
    purge = sub.add_parser("purge", help="delete matching records for good")
    _filters(purge)
    purge.add_argument("--all", action="store_true", help="purge every record")
    purge.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    purge.add_argument("--export", metavar="FILE", help="write them as JSON Lines first")
    restore = sub.add_parser("restore", help="put exported records back in the failed queue")
    restore.add_argument("file", metavar="FILE", help="a file written by export or purge")


def build_parser() -> argparse.ArgumentParser:
    """The command line: one subcommand per operation."""
    parser = argparse.ArgumentParser(
        prog="warren failed",
        description="Inspect, replay, export and purge the failed tasks of CRON_NAMESPACE.",
        epilog="exit codes: 0 all went well, 1 some records not moved (or none found, or the "
        "purge declined), 2 usage error, 3 broker unreachable",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _reading(sub)
    _moving(sub)
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line read."""
    return build_parser().parse_args(argv)


def selection(args: argparse.Namespace) -> RecordFilter:
    """The filters of the command line; replay and purge need one, or --all."""
    # Here, not at the top: failed records bring pydantic and aio-pika, which help needs not.
    from warren_cron.failed.select import RecordFilter, parse_since

    if getattr(args, "limit", None) is not None and args.limit < 1:
        raise UsageError("--limit must be at least 1")
    if args.command == "show":
        return RecordFilter(run_id=args.run_id)
    since = getattr(args, "since", None)
    select = RecordFilter(
        schedule=getattr(args, "schedule", None),
        task=getattr(args, "task", None),
        reason=getattr(args, "reason", None),
        run_id=getattr(args, "run_id", None),
        since=parse_since(since) if since else None,
        text=getattr(args, "text", None),
    )
    if args.command in ("replay", "purge") and select.selects_all and not args.all:
        raise UsageError(
            f"{args.command} needs a filter (--schedule, --task, --reason, --since, --run-id, "
            "--text) "
            "or --all to take every record"
        )
    return select
