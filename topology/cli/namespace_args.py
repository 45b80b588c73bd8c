"""``warren namespace``'s command line, with the standard library alone, so that ``warren
namespace --help`` and ``warren namespace delete --help`` answer at once."""

from __future__ import annotations

import argparse

PROG = "warren namespace delete"


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Command line of ``warren namespace``."""
    parser = argparse.ArgumentParser(
        prog="warren namespace",
        description="Remove a namespace: every queue, stream and exchange warren declared in "
        "it, and nothing of another namespace, also one whose name starts the same.",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    remove = actions.add_parser(
        "delete",
        prog=PROG,
        help="list, then delete, every object of a namespace",
        description="List, then delete, every queue, stream and exchange warren declared in "
        "namespace NAME (CRON_AMQP_URL's broker). Refused while warren processes are "
        "connected (consumers on its queues, a running task's lock): stop them, or --force. "
        "Without --management-url AMQP cannot list queues: the names warren can compute are "
        "looked up (fixed ones, delay levels, retry queues of the known plans) and queues "
        "made per key are not found. Exit code: 0 done or nothing found, 1 refused or not "
        "all deleted, 2 usage, 3 broker or management API unreachable.",
    )
    remove.add_argument("name", metavar="NAME", help="the namespace (CRON_NAMESPACE's value)")
    remove.add_argument("--dry-run", action="store_true", help="list, delete nothing")
    remove.add_argument(
        "--force", action="store_true", help="delete while warren processes are connected"
    )
    remove.add_argument(
        "--management-url",
        metavar="URL",
        help="the management API (http://user:pass@host:15672/; the AMQP URL's user by "
        "default): lists every object, queues made per key included",
    )
    remove.add_argument(
        "--plan",
        action="append",
        default=[],
        metavar="KEY",
        help="without --management-url: also look for this plan's retry queues (repeatable)",
    )
    remove.add_argument("--json", action="store_true", help="one JSON object, for machines")
    return parser.parse_args(argv)
