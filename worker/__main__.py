"""``warren worker``: run the worker until SIGTERM or SIGINT."""

from __future__ import annotations

import sys

from warren_cron.errors import HandlerImportError, SettingsError
from warren_cron.runtime.logs import configure_logging
from warren_cron.runtime.process import (
    Checks,
    config_error,
    config_ok,
    run_process,
    run_service,
)
from warren_cron.runtime.process_args import worker_args as parse_args
from warren_cron.runtime.settings import load_settings
from warren_cron.worker.consumer import Worker
from warren_cron.worker.registry import import_handler_modules
from warren_cron.worker.settings import WorkerSettings


async def serve(settings: WorkerSettings) -> None:
    """Run a worker; SIGTERM and SIGINT start a graceful shutdown."""
    worker = Worker(settings)
    await run_service(worker, settings.metrics_port, health_checks(worker))


def health_checks(worker: Worker) -> Checks:
    """What /healthz reports: the broker connection, and a consumer the broker has not cancelled."""
    return {"broker-connection": worker.connected, "consumer": worker.consuming}


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = parse_args(argv)
    try:
        settings = load_settings(WorkerSettings)
        configure_logging(settings.log_level, settings.log_format)
        import_handler_modules(settings.handler_modules)
    except (SettingsError, HandlerImportError) as error:
        return config_error("worker", error)
    if args.check:
        return config_ok("worker")
    return run_process("worker", serve(settings))


if __name__ == "__main__":
    sys.exit(main())
