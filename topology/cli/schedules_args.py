"""``warren schedules``'s command line, every subcommand's, with the standard library alone, so
that ``warren schedules --help`` and each subcommand's help answer at once."""

from __future__ import annotations

import argparse
from typing import Any

from warren_cron.cli.enqueue_args import time_arg


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line of the script."""
    parser = argparse.ArgumentParser(
        prog="warren schedules",
        description="List, trigger, pause and resume schedules (of CRON_SCHEDULES_FILE or "
        "runtime ones); create, update, archive and get runtime schedules, kept by the broker; "
        "apply a file of schedules to them (a diff, then the changes); backfill a past range.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = sub.add_parser("list", help="each schedule (file and runtime), its next fire, status")
    listing.add_argument("--json", action="store_true", help="a JSON array, for machines")
    trigger = sub.add_parser("trigger", help="publish a run of NAME now; prints its run id")
    trigger.add_argument("name", metavar="NAME")
    pause = sub.add_parser("pause", help="stop publishing NAME's fires until it is resumed")
    pause.add_argument("name", metavar="NAME")
    pause.add_argument("--reason", required=True, help="why; shown by list and status")
    resume = sub.add_parser("resume", help="publish NAME's fires again")
    resume.add_argument("name", metavar="NAME")
    resume.add_argument(
        "--catch-up",
        action="store_true",
        help="also publish the fires missed while paused, under the schedule's catch_up "
        "policy and misfire_grace_seconds",
    )
    add_store(sub)
    add_apply(sub)
    add_backfill(sub)
    return parser.parse_args(argv)


def add_store(sub: Any) -> None:
    """The subcommands of runtime schedules."""
    create = sub.add_parser("create", help="create a runtime schedule from JSON or TOML")
    create.add_argument("file", nargs="?", metavar="FILE", help="the fields; default stdin")
    update = sub.add_parser("update", help="change fields of runtime schedule NAME")
    update.add_argument("name", metavar="NAME")
    update.add_argument("file", nargs="?", metavar="FILE", help="fields to change; stdin")
    # ``--version`` is every subcommand's: ``warren X --version`` prints warren's.
    update.add_argument(
        "--if-version", dest="version", type=int, required=True, help="the version you read"
    )
    archive = sub.add_parser("archive", help="stop runtime schedule NAME for good")
    archive.add_argument("name", metavar="NAME")
    archive.add_argument(
        "--if-version", dest="version", type=int, help="only if this is still the version"
    )
    get = sub.add_parser(
        "get", help="NAME's source, spec, status (a runtime one's version and history of changes)"
    )
    get.add_argument("name", metavar="NAME")
    get.add_argument("--json", action="store_true", help="JSON, for machines")
    for parser in (create, update, archive):
        parser.add_argument("--reason", help="why; kept in the schedule's history")


def add_apply(sub: Any) -> None:
    """The ``apply`` subcommand."""
    apply = sub.add_parser(
        "apply", help="make the store hold FILE's schedules (a diff, then the changes)"
    )
    apply.add_argument("file", metavar="FILE", help="a schedules file ([[schedule]] tables)")
    apply.add_argument(
        "--dry-run", action="store_true", help="show the diff only; exit 1 if it has changes"
    )
    apply.add_argument(
        "--prune", action="store_true", help="archive schedules FILE managed and no longer names"
    )
    apply.add_argument(
        "--force", action="store_true", help="overwrite schedules changed in the store since"
    )
    apply.add_argument(
        "--as",
        dest="manager",
        help="the name FILE manages its schedules under; default its file name, so a checkout "
        "anywhere applies as the same file",
    )


def add_backfill(sub: Any) -> None:
    """The ``backfill`` subcommand."""
    backfill = sub.add_parser(
        "backfill", help="publish NAME's fires of a past range, each run id once"
    )
    backfill.add_argument("name", metavar="NAME")
    backfill.add_argument(
        "--from", dest="start", type=time_arg, required=True, help="first fire time, ISO 8601"
    )
    backfill.add_argument(
        "--to", dest="end", type=time_arg, required=True, help="last fire time, ISO 8601, past"
    )
    backfill.add_argument("--dry-run", action="store_true", help="list the fires, send none")
    backfill.add_argument("--rate", type=float, default=10.0, help="fires per second (10)")
    backfill.add_argument(
        "--run-timeout",
        type=float,
        default=3600.0,
        help="Forbid/Replace: seconds to wait for each run to end before the next (3600)",
    )
