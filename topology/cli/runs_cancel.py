"""``warren runs cancel``: cancel one run by id, or the runs of schedules by pattern and state.

    warren runs cancel RUN_ID [--reason TEXT]
    warren runs cancel --schedule 'x*' [--state delayed] [--since 7d] [--dry-run]

A run not started never starts; a running attempt is stopped by the worker running it; both
end ``cancelled``. Exit codes: 0 cancelled (or listed, with ``--dry-run``), 1 some of a bulk
cancel's runs could not be cancelled, 2 bad usage, 3 broker unreachable, 5 the run had ended
already (nothing cancelled).
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta

from warren_cron.cancel.bounds import MAX_BULK
from warren_cron.cancel.request import CancelAnswer
from warren_cron.cli.common import EXIT_OK, EXIT_PARTIAL, EXIT_USAGE
from warren_cron.client.client import Client
from warren_cron.clock import utcnow
from warren_cron.errors import CancelError
from warren_cron.failed.select import parse_since
from warren_cron.history.events import who
from warren_cron.history.lifecycle import RunStatus
from warren_cron.ops.runs_cancel import cancel, cancel_each, cancellable

#: A single cancel found the run ended already: nothing was cancelled.
EXIT_ENDED = 5


def usage_error(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments of ``cancel``, if anything."""
    if (args.run_id is None) == (args.schedule is None):
        return "give a RUN_ID, or --schedule PATTERN for a bulk cancel (not both)"
    if args.run_id is not None and (args.state or args.dry_run or args.since):
        return "--state, --since and --dry-run go with --schedule"
    if not 0 < args.limit <= MAX_BULK:
        return f"--limit must be 1 to {MAX_BULK}"
    return None


async def cancel_command(client: Client, args: argparse.Namespace, prog: str) -> int:
    """Run ``cancel``: one run, or a bulk cancel."""
    try:
        if args.run_id is not None:
            return await _one(client, args.run_id, args.reason)
        return await _bulk(client, args)
    except CancelError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return EXIT_USAGE


async def _one(client: Client, run_id: str, reason: str | None) -> int:
    answer = await cancel(client, run_id, reason, who())
    print(answer.message)
    return EXIT_OK if answer.cancelled else EXIT_ENDED


async def _bulk(client: Client, args: argparse.Namespace) -> int:
    keep = timedelta(seconds=client.settings.history_max_age_seconds)
    try:
        since = utcnow() - keep if args.since is None else parse_since(args.since, utcnow())
    except ValueError as error:
        raise CancelError(str(error)) from None
    found = await cancellable(client, args.schedule, args.state, since, args.limit)
    if not found:
        print(f"no run of a schedule matching {args.schedule!r} to cancel")
        return EXIT_OK
    if args.dry_run:
        for status in found:
            print(_line(status, "would cancel"))
        print(f"{len(found)} run(s) would be cancelled (dry run: nothing cancelled)")
        return EXIT_OK
    done = await cancel_each(client, found, args.reason, who(), _told)
    print(f"{done.cancelled} run(s) cancelled, {done.missed} ended before the cancel")
    return EXIT_PARTIAL if done.missed else EXIT_OK


def _told(status: RunStatus, answer: CancelAnswer) -> None:
    print(_line(status, "cancelled" if answer.cancelled else "ended already"))


def _line(status: RunStatus, what: str) -> str:
    return f"{what}: {status.run_id}  {status.state}  schedule={status.schedule or '-'}"
