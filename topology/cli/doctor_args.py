"""``warren doctor``'s command line, with the standard library alone, so that ``warren doctor
--help`` answers at once."""

from __future__ import annotations

import argparse


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line of ``warren doctor``."""
    parser = argparse.ArgumentParser(
        prog="warren doctor",
        description="Check the broker for what matters to warren; each finding says what to do. "
        "Exit code: 0 fine, 1 warnings, 2 problems, 3 broker unreachable.",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object, for machines")
    parser.add_argument(
        "--management-url",
        metavar="URL",
        help="the management API (http://user:pass@host:15672/; the AMQP URL's user by "
        "default): adds the metadata store on 3.13-4.2, the nodes, and policies",
    )
    parser.add_argument(
        "--watch",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="watch the failed queue this long for growth (default 5; 0 skips)",
    )
    return parser.parse_args(argv)
