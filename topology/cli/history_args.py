"""``warren history``'s command line, with the standard library alone, so that ``warren
history --help`` answers at once."""

from __future__ import annotations

import argparse
import sys

from warren_cron.history.outcomes import OUTCOMES

COMMANDS = ("list", "show")


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``list`` (the default) and ``show RUN_ID``."""
    parser = argparse.ArgumentParser(
        prog="warren history",
        description="Runs of CRON_NAMESPACE from its history stream: the newest, or one in full.",
        epilog="exit codes: 0 done, 1 no history stream (or no event of the run), 2 usage "
        "error, 3 broker unreachable",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    listing = sub.add_parser("list", help="the newest runs, one line each (the default)")
    listing.add_argument("--schedule", help="schedule name; may use * and ?, e.g. 'billing-*'")
    listing.add_argument("--outcome", choices=OUTCOMES, help="only runs that ended so (or are)")
    listing.add_argument("--since", default="24h", help="an age (30m, 2h, 7d) or ISO time")
    listing.add_argument("--limit", type=int, default=50, help="at most this many runs (50)")
    listing.add_argument("--json", action="store_true", help="a JSON array, for machines")
    show = sub.add_parser("show", help="every event of one run: fire, attempts, failure, replays")
    show.add_argument("run_id", metavar="RUN_ID")
    show.add_argument(
        "--since", help="read from here (default: just before the time in RUN_ID, else all)"
    )
    show.add_argument("--json", action="store_true", help="the run and its events as JSON")
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, ``list`` when it names no command."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in (*COMMANDS, "-h", "--help"):
        argv = ["list", *argv]
    return build_parser().parse_args(argv)
