"""``warren monitor``: log and alert on failed tasks until SIGTERM or SIGINT."""

from __future__ import annotations

import sys

import structlog

from warren_cron.errors import ScheduleError, SettingsError
from warren_cron.monitor.service import Monitor
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.runtime.logs import configure_logging
from warren_cron.runtime.process import (
    config_error,
    config_ok,
    run_process,
    run_service,
)
from warren_cron.runtime.process_args import monitor_args as parse_args
from warren_cron.runtime.settings import load_settings
from warren_cron.schedules.load import configured_schedules
from warren_cron.schedules.schedule import Schedule

log = structlog.get_logger("monitor")


def file_schedules(settings: MonitorSettings) -> tuple[Schedule, ...]:
    """The schedules file's schedules: their retry queues are watched from the start, and
    their ``expect_success_within``."""
    try:
        schedules = configured_schedules(settings)
    except ScheduleError as error:
        # Not fatal: the retry queues of a plan are watched once one of its tasks fails.
        log.warning("schedules file not read", error=str(error))
        return ()
    return () if schedules is None else schedules.schedules


async def serve(settings: MonitorSettings) -> None:
    """Run the monitor; SIGTERM and SIGINT stop it."""
    monitor = Monitor(settings, schedules=file_schedules(settings))
    await run_service(monitor, settings.metrics_port, {"broker-connection": monitor.connected})


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = parse_args(argv)
    try:
        settings = load_settings(MonitorSettings)
    except SettingsError as error:
        return config_error("monitor", error)
    configure_logging(settings.log_level, settings.log_format)
    if args.check:
        return config_ok("monitor")
    return run_process("monitor", serve(settings))


if __name__ == "__main__":
    sys.exit(main())
