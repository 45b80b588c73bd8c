"""``warren runs``'s command line: ``show``, ``wait`` and ``cancel``, with the standard library
alone, so that ``warren runs --help`` and its subcommands' help answer at once."""

from __future__ import annotations

import argparse

from warren_cron.cancel.bounds import CANCELLABLE, MAX_BULK, MAX_REASON

PROG = "warren runs"
CANCEL_EPILOG = (
    "A run not yet started (in the main queue, a retry queue or the delay levels) never "
    "starts; a running attempt is stopped by the worker that runs it. Both end 'cancelled'. "
    "A bulk cancel finds runs in the history stream (a run enqueued without any event yet is "
    "cancelled by its id). exit codes: 0 cancelled (or listed with --dry-run), 1 part of a "
    "bulk cancel failed, 2 usage, 3 broker, 5 the run had ended already"
)


def add_cancel(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``cancel`` subcommand."""
    cancel = commands.add_parser(
        "cancel",
        help="cancel a run, or a schedule's runs by state",
        description="Cancel a run by id, or the runs of schedules matching --schedule.",
        epilog=CANCEL_EPILOG,
    )
    cancel.add_argument("run_id", nargs="?", help="the run to cancel")
    cancel.add_argument("--reason", help=f"why, kept in the history (at most {MAX_REASON} chars)")
    cancel.add_argument("--schedule", help="bulk: schedules matching this glob ('x*')")
    cancel.add_argument("--state", choices=CANCELLABLE, help="bulk: only runs in this state")
    cancel.add_argument(
        "--since", default=None, help="bulk: runs with events since (age like 2h, or a time)"
    )
    cancel.add_argument(
        "--limit", type=int, default=1000, help=f"bulk: at most this many runs (<= {MAX_BULK})"
    )
    cancel.add_argument(
        "--dry-run", action="store_true", help="bulk: list the runs, cancel nothing"
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``show``, ``wait`` and ``cancel``."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="A run's state and attempts, from the history stream.",
        epilog="exit codes: 0 succeeded, 1 failed/expired/cancelled, 2 usage, 3 broker, "
        "4 timeout (wait), 5 cancel: the run had ended; show exits 0 for a run it found, 1 "
        "for one with no event yet",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show", help="the run's state, attempts and result")
    show.add_argument("run_id")
    show.add_argument("--json", action="store_true", help="print the status as JSON")
    wait = commands.add_parser("wait", help="wait for the run to end; exit by its state")
    wait.add_argument("run_id")
    wait.add_argument("--timeout", type=float, default=None, help="give up after S seconds")
    wait.add_argument("--json", action="store_true", help="print the final status as JSON")
    add_cancel(commands)
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line read."""
    return build_parser().parse_args(argv)
