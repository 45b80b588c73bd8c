"""``warren runs``: where one run stands, or wait for it to end.

    warren runs show RUN_ID [--json]
    warren runs wait RUN_ID [--timeout S] [--json]
    warren runs cancel RUN_ID [--reason TEXT]        (``topology/cli/runs_cancel.py``)
    warren runs cancel --schedule 'x*' [--state delayed] [--dry-run]

Exit codes: 0 the run succeeded (``show``: the run was found, whatever its state), 1 it
failed, expired or was cancelled (``show``: no event of it yet), 2 bad usage, 3 the broker
could not be reached, 4 ``wait`` timed out before the run ended.
"""

from __future__ import annotations

import argparse
import sys

import orjson

from warren_cron.cli.common import EXIT_BROKER, EXIT_OK, EXIT_USAGE, log_to_stderr, run_command
from warren_cron.cli.runs_args import PROG, build_parser
from warren_cron.cli.runs_cancel import cancel_command, usage_error
from warren_cron.client.client import Client
from warren_cron.clock import utcnow
from warren_cron.errors import RunTimeout, SettingsError
from warren_cron.history.lifecycle import RunStatus
from warren_cron.runtime.settings import CronSettings, load_settings

#: The run succeeded (``show``: it has events).
EXIT_SUCCEEDED = EXIT_OK
#: The run failed, expired or was cancelled (``show``: it has no event yet).
EXIT_UNSUCCESSFUL = 1
#: ``wait`` gave up before the run ended.
EXIT_TIMEOUT = 4
__all__ = ["EXIT_BROKER", "EXIT_SUCCEEDED", "EXIT_TIMEOUT", "EXIT_UNSUCCESSFUL", "EXIT_USAGE"]


def printed(status: RunStatus, as_json: bool) -> None:
    """Print the status, as JSON or as lines for a person."""
    if as_json:
        print(orjson.dumps(status.as_json(), option=orjson.OPT_INDENT_2).decode())
        return
    print(f"{status.run_id}  {status.state}  task={status.task or '-'}")
    for attempt in status.attempts:
        where = attempt.worker or "-"
        print(f"  attempt {attempt.number}: {attempt.outcome or 'running'} on {where}", end="")
        print(f" http={attempt.http_status}" if attempt.http_status else "", end="")
        print(f"  {attempt.error}" if attempt.error else "")
    if status.last_heartbeat is not None:
        progress = orjson.dumps(status.progress).decode()
        ago = (utcnow() - status.last_heartbeat).total_seconds()
        print(f"  progress: {progress}  ({status.heartbeats} heartbeats, last {ago:.0f} s ago)")
    if status.result is not None:
        print(f"  result: {orjson.dumps(status.result).decode()}")


def exit_of(status: RunStatus) -> int:
    """The exit code of an ended run's state."""
    return EXIT_SUCCEEDED if status.state == "succeeded" else EXIT_UNSUCCESSFUL


async def command(settings: CronSettings, args: argparse.Namespace) -> int:
    """Run ``show``, ``wait`` or ``cancel`` with one client."""
    async with Client(settings, name="warren-runs") as client:
        if args.command == "cancel":
            return await cancel_command(client, args, PROG)
        handle = client.run(args.run_id)
        if args.command == "show":
            status = await handle.status()
            printed(status, args.json)
            return EXIT_OK if status.attempts or status.task else EXIT_UNSUCCESSFUL
        try:
            status = await handle.wait(timeout=args.timeout)
        except RunTimeout as error:
            print(f"{PROG}: {error}", file=sys.stderr)
            return EXIT_TIMEOUT
        printed(status, args.json)
        return exit_of(status)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    wrong = usage_error(args) if args.command == "cancel" else None
    if wrong is not None:
        print(f"{PROG} cancel: error: {wrong}", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "wait" and args.timeout is not None and args.timeout <= 0:
        print(f"{PROG}: error: --timeout must be a positive number of seconds", file=sys.stderr)
        return EXIT_USAGE
    try:
        settings = load_settings(CronSettings)
    except SettingsError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    log_to_stderr(settings.log_level)
    return run_command(PROG, command(settings, args))
