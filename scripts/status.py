#!/usr/bin/env python3
"""One row per schedule of CRON_SCHEDULES_FILE, like ``kubectl get cronjobs``.

When each schedule fires, whether it is paused, its last fire, the outcome of its last ended
run, its last success and failure, its next fire, its runs retrying now and its records in
the failed queue. The history comes from the monitor's status fold (``<ns>_status``) and the
events the stream got after it; without a fold (no monitor running) the whole stream is
folded, which takes longer. Exit codes: 0 shown, 2 usage or schedules file error, 3 broker
trouble.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
from _cli import EXIT_OK, EXIT_USAGE, aligned, log_to_stderr, run_command

from topology.broker.connect import connect
from topology.durations import for_people
from topology.envelope import utcnow
from topology.errors import ScheduleError, SettingsError
from topology.history.snapshot import current_status
from topology.history.status import ScheduleState, StatusFold
from topology.names import Names
from topology.runtime.settings import CronSettings, load_settings
from topology.schedules.control import Pause, read_pauses
from topology.schedules.load import Schedule, ScheduleSet, load_schedules
from topology.schedules.timing import utc_text

HEAD = (
    "NAME",
    "SCHEDULE",
    "PAUSED",
    "LAST FIRE",
    "LAST OUTCOME",
    "LAST SUCCESS",
    "LAST FAILURE",
    "NEXT FIRE",
    "RETRYING",
    "FAILED",
)

NO_FOLD = (
    "status.py: no status fold in the broker: the monitor (python -m worker.monitor) is not "
    "running or has not written one yet; folded the whole history stream"
)


@dataclass(frozen=True, slots=True)
class StatusRow:
    """One schedule's status; times in UTC, None where there is none."""

    name: str
    schedule: str
    paused: bool
    last_fire_at: datetime | None
    last_outcome: str | None
    last_success_at: datetime | None
    last_failure_at: datetime | None
    next_fire_at: datetime | None
    retrying: int
    failed_records: int
    expect_success_within: str | None

    def to_json(self) -> dict[str, Any]:
        """The row as JSON values, times as ``2026-01-31T02:30:00Z``."""
        values = (getattr(self, key) for key in self.__slots__)
        return {
            key: utc_text(value) if isinstance(value, datetime) else value
            for key, value in zip(self.__slots__, values, strict=True)
        }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line of the script."""
    parser = argparse.ArgumentParser(
        prog="status.py",
        description="Show every schedule of CRON_SCHEDULES_FILE: when it fires, paused or "
        "not, last fire, last outcome, last success and failure, next fire, runs retrying "
        "and records in the failed queue.",
    )
    parser.add_argument("--json", action="store_true", help="a JSON array, for machines")
    return parser.parse_args(argv)


def fires_when(schedule: Schedule) -> str:
    """How a schedule fires, as written in the file: its cron (and zone) or its interval."""
    spec = schedule.spec
    if spec.cron is None:
        return f"every {spec.every}"
    return f"{spec.cron} ({spec.timezone})" if spec.timezone else spec.cron


def status_row(
    schedule: Schedule, state: ScheduleState, counts: tuple[int, int], paused: bool, now: datetime
) -> StatusRow:
    """The row of one schedule."""
    return StatusRow(
        schedule.name,
        fires_when(schedule),
        paused,
        state.last_fire_at,
        state.last_outcome,
        state.last_success_at,
        state.last_failure_at,
        None if paused else schedule.next_fire(now),
        *counts,
        schedule.spec.expect_success_within,
    )


def status_rows(
    schedules: ScheduleSet, fold: StatusFold, pauses: dict[str, Pause], now: datetime
) -> list[StatusRow]:
    """A row per schedule of the file, in file order."""
    counts, blank = fold.counts(), ScheduleState()
    return [
        status_row(
            schedule,
            fold.schedules.get(schedule.name, blank),
            counts.get(schedule.name, (0, 0)),
            schedule.name in pauses,
            now,
        )
        for schedule in schedules.schedules
    ]


def relative(moment: datetime | None, now: datetime) -> str:
    """``3m ago``, ``in 2h5m``; ``-`` for none."""
    if moment is None:
        return "-"
    seconds = (moment - now).total_seconds()
    spelled = for_people(int(abs(seconds)), parts=2)
    return f"in {spelled}" if seconds > 0 else f"{spelled} ago"


def table(rows: list[StatusRow], now: datetime) -> str:
    """Rows as an aligned text table, times relative to ``now``."""
    cells = [HEAD]
    for r in rows:
        times = (r.last_fire_at, r.last_success_at, r.last_failure_at, r.next_fire_at)
        fire, success, failure, next_fire = (relative(t, now) for t in times)
        outcome = r.last_outcome or "-"
        counts = (str(r.retrying), str(r.failed_records))
        paused = "yes" if r.paused else "no"
        cells.append(
            (r.name, r.schedule, paused, fire, outcome, success, failure, next_fire, *counts)
        )
    return aligned(cells)


async def gather(settings: CronSettings) -> tuple[StatusFold, bool, dict[str, Pause]]:
    """The history's fold (and whether a monitor's fold was its start) and the pauses."""
    names = Names(settings.namespace)
    connection = await connect(settings, "warren-status-script", log_outages=False)
    async with connection:
        # Both are reads to a stream's end; side by side, their waits overlap.
        (fold, stored), pauses = await asyncio.gather(
            current_status(connection, names), read_pauses(connection, names)
        )
    return fold, stored, pauses


def load(argv: list[str] | None) -> tuple[argparse.Namespace, CronSettings, ScheduleSet]:
    """Arguments, settings and the schedules file; raises on bad ones."""
    args = parse_args(argv)
    settings = load_settings(CronSettings)
    return args, settings, load_schedules(settings.schedules_file, settings)


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
        print(f"status.py: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    return run_command("status.py", report(settings, schedules, args.json))


async def report(settings: CronSettings, schedules: ScheduleSet, as_json: bool) -> int:
    """Read the status and print it."""
    fold, stored, pauses = await gather(settings)
    if not stored:
        print(NO_FOLD, file=sys.stderr)
    now = utcnow()
    show(status_rows(schedules, fold, pauses, now), as_json, now)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
