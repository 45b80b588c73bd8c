"""One row per schedule, of CRON_SCHEDULES_FILE and runtime ones alike, like ``kubectl get
cronjobs``.

The first line says whether a scheduler leads (``topology/schedules/heartbeats.py``). Then each
schedule's source (``file`` or ``runtime``), when it fires, whether it is paused, its last
fire, the outcome of its last ended run, its last success and failure, its next fire, its
runs retrying now and its records in the failed queue. What is shown is read by
``topology/ops/namespace_status.py``, the rows being ``topology/ops/schedules.py``'s, as every
surface's; without a schedules file only the runtime ones are shown. The history comes from
the monitor's status fold (``<ns>_status``) and the events the stream got after it; without a
fold (no monitor running) the whole stream is folded, which takes longer. Exit codes: 0
shown, 2 usage or schedules file error, 3 broker trouble.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime

import orjson

from warren_cron.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    aligned,
    log_to_stderr,
    run_command,
)
from warren_cron.cli.status_args import parse_args
from warren_cron.durations import relative
from warren_cron.errors import ScheduleError, SettingsError
from warren_cron.ops.namespace_status import namespace_status
from warren_cron.runtime.settings import CronSettings, load_settings
from warren_cron.schedules.load import ScheduleSet, file_or_none
from warren_cron.schedules.status_rows import StatusRow

HEAD = (
    "NAME",
    "SCHEDULE",
    "STATUS",
    "LAST FIRE",
    "LAST OUTCOME",
    "LAST SUCCESS",
    "LAST FAILURE",
    "NEXT FIRE",
    "RETRYING",
    "FAILED",
    # Last: a script that reads the columns by position reads the same ones as before.
    "SOURCE",
)

NO_FOLD = (
    "warren status: no status fold in the broker: the monitor (warren monitor) is not "
    "running or has not written one yet; folded the whole history stream"
)


def table(rows: list[StatusRow], now: datetime) -> str:
    """Rows as an aligned text table, times relative to ``now``."""
    cells = [HEAD]
    for r in rows:
        times = (r.last_fire_at, r.last_success_at, r.last_failure_at)
        fire, success, failure = (relative(t, now) for t in times)
        next_fire = r.next_fire_text(now)
        outcome = r.last_outcome or "-"
        counts = (str(r.retrying), str(r.failed_records))
        cells.append(
            (
                r.name,
                r.schedule,
                r.status,
                fire,
                outcome,
                success,
                failure,
                next_fire,
                *counts,
                r.source,
            )
        )
    return aligned(cells)


def load(argv: list[str] | None) -> tuple[argparse.Namespace, CronSettings, ScheduleSet]:
    """Arguments, settings and the schedules file (none when there is no file); raises on
    bad ones."""
    args = parse_args(argv)
    settings = load_settings(CronSettings)
    return args, settings, file_or_none(settings.schedules_file, settings)


def show(rows: list[StatusRow], as_json: bool, now: datetime) -> None:
    """Print the rows as JSON or as a table."""
    if as_json:
        print(orjson.dumps([row.to_json() for row in rows], option=orjson.OPT_INDENT_2).decode())
    else:
        print(table(rows, now))


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    log_to_stderr("WARNING")  # stdout is the table or the JSON
    try:
        args, settings, schedules = load(argv)
    except (SettingsError, ScheduleError) as error:
        print(f"warren status: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    return run_command("warren status", report(settings, schedules, args.json))


async def report(settings: CronSettings, schedules: ScheduleSet, as_json: bool) -> int:
    """Read the status and print it."""
    status = await namespace_status(settings, schedules)
    if not status.from_monitor_fold:
        print(NO_FOLD, file=sys.stderr)
    if not as_json:
        print(status.scheduler.line())
    show(status.rows, as_json, status.at)
    return EXIT_OK
