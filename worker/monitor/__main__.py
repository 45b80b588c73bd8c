"""``python -m worker.monitor``: log and alert on failed tasks until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import sys

import structlog

from scheduler.schedules import ScheduleError, load_schedules
from scheduler.settings import SchedulerSettings
from topology.cli import config_error, config_ok, run_process, run_service
from topology.logs import configure_logging
from topology.plan import RetryPlan
from topology.settings import SettingsError, load_settings
from worker.monitor.service import Monitor
from worker.monitor.settings import MonitorSettings

log = structlog.get_logger("monitor")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line: everything else is configured with CRON_* variables."""
    parser = argparse.ArgumentParser(
        prog="python -m worker.monitor",
        description="Log one line and alert (CRON_ALERT_WEBHOOK_URL) per failed task, grouped "
        "and rate limited; alert on a deep failed queue and on stalled retry queues. "
        "Configure with CRON_* environment variables (see .env.example).",
    )
    parser.add_argument("--check", action="store_true", help="validate settings, then exit")
    return parser.parse_args(argv)


def schedule_plans() -> list[RetryPlan]:
    """Plans of the schedules file, so their retry queues are watched from the start."""
    try:
        settings = load_settings(SchedulerSettings)
        if not settings.schedules_file.exists():
            return []
        return list(load_schedules(settings.schedules_file, settings).plans().values())
    except (SettingsError, ScheduleError) as error:
        # Not fatal: the retry queues of a plan are watched once one of its tasks fails.
        log.warning("schedules file not read", error=str(error))
        return []


async def serve(settings: MonitorSettings) -> None:
    """Run the monitor; SIGTERM and SIGINT stop it."""
    monitor = Monitor(settings, schedule_plans())
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
