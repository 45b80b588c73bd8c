"""``warren status``'s command line, with the standard library alone, so that ``warren status
--help`` answers at once."""

from __future__ import annotations

import argparse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line of the script."""
    parser = argparse.ArgumentParser(
        prog="warren status",
        description="Show every schedule, of CRON_SCHEDULES_FILE and runtime ones alike: its "
        "source (file or runtime), when it fires, paused or not, last fire, last outcome, "
        "last success and failure, next fire, runs retrying and records in the failed queue.",
    )
    parser.add_argument("--json", action="store_true", help="a JSON array, for machines")
    return parser.parse_args(argv)
