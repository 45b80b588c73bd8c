"""``warren queues``'s command line, with the standard library alone, so that ``warren queues
--help`` answers at once."""

from __future__ import annotations

import argparse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line of the script."""
    parser = argparse.ArgumentParser(
        prog="warren queues",
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
