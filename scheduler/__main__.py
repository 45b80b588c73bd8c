"""``warren scheduler``: publish due fires while leading; ``--check`` validates and exits."""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import sys

import structlog

from warren_cron.clock import utcnow
from warren_cron.errors import ScheduleError, SettingsError
from warren_cron.runtime.logs import configure_logging
from warren_cron.runtime.process import (
    EXIT_OK,
    config_error,
    run_process,
    run_service,
)
from warren_cron.runtime.process_args import scheduler_args as parse_args
from warren_cron.runtime.settings import load_settings
from warren_cron.scheduler.check import report
from warren_cron.scheduler.service import Scheduler
from warren_cron.scheduler.settings import SchedulerSettings
from warren_cron.schedules.load import ScheduleSet, file_or_none, load_schedules

log = structlog.get_logger("scheduler")
NO_FILE = "no schedules file: only the store's runtime schedules run"


def load(args: argparse.Namespace) -> tuple[SchedulerSettings, ScheduleSet]:
    """Settings and schedules, or ``SettingsError``/``ScheduleError`` naming the problem. A
    missing file is no schedules of the file's (every one may live in the store), except
    for ``--check``, which validates the file."""
    settings = load_settings(SchedulerSettings)
    if args.schedules is not None:
        settings = settings.model_copy(update={"schedules_file": args.schedules})
    if args.check:
        return settings, load_schedules(settings.schedules_file, settings)
    return settings, file_or_none(settings.schedules_file, settings).compact()


def freeze_heap() -> None:
    """Keep what exists now, the loaded schedules above all, out of the cyclic GC's scans.

    A full collection walks every tracked object: with 100,000 schedules that is a pause of
    over 100 ms in the middle of a burst of fires. The schedules live until the next reload.
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()


async def serve(settings: SchedulerSettings, schedules: ScheduleSet) -> None:
    """Run until SIGTERM or SIGINT; SIGHUP reloads the schedules."""
    if not settings.schedules_file.exists():
        # Not an error: every schedule may live in the store; the file is read once it is there.
        log.info(NO_FILE, file=str(settings.schedules_file))
    scheduler = Scheduler(settings, schedules)
    scheduler.on_reload = freeze_heap
    freeze_heap()
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, scheduler.reload)
    await run_service(scheduler, settings.metrics_port, {"broker-connection": scheduler.connected})


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = parse_args(argv)
    try:
        settings, schedules = load(args)
    except (SettingsError, ScheduleError) as error:
        return config_error("scheduler", error)
    if args.check:
        print(report(schedules, settings, utcnow()))
        return EXIT_OK
    configure_logging(settings.log_level, settings.log_format)
    return run_process("scheduler", serve(settings, schedules))


if __name__ == "__main__":
    sys.exit(main())
