"""``python -m worker``: run the worker until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from wsgiref.simple_server import WSGIServer

import structlog

from topology.amqp import BrokerUnavailable
from topology.declare import TopologyError
from topology.logs import configure_logging
from topology.settings import SettingsError, load_settings
from worker.consumer import Worker
from worker.registry import HandlerImportError, import_handler_modules
from worker.settings import WorkerSettings

EXIT_OK = 0
EXIT_CONFIG = 2
EXIT_BROKER = 3


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command line: everything else is configured with CRON_* variables."""
    parser = argparse.ArgumentParser(
        prog="python -m worker",
        description="Consume due tasks from RabbitMQ, run them, retry failures through "
        "dead-letter queues. Configure with CRON_* environment variables (see .env.example).",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="validate settings and import handler modules, then exit",
    )
    return parser.parse_args(argv)


async def serve(settings: WorkerSettings) -> None:
    """Run a worker; SIGTERM and SIGINT start a graceful shutdown."""
    worker = Worker(settings)
    server = start_metrics(settings.metrics_port, worker)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.stop)
    try:
        await worker.run()
    finally:
        if server is not None:
            server.shutdown()


def start_metrics(port: int, worker: Worker) -> WSGIServer | None:
    """Serve /metrics and /healthz; prometheus-client loads only when a port is set."""
    if port == 0:
        return None
    from topology.metrics import Health, serve_metrics

    health = Health()
    health.add("broker-connection", worker.connected)
    health.add("consumer", worker.consuming)
    return serve_metrics(port, health)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = parse_args(argv)
    try:
        settings = load_settings(WorkerSettings)
        configure_logging(settings.log_level, settings.log_format)
        import_handler_modules(settings.handler_modules)
    except (SettingsError, HandlerImportError) as error:
        print(f"worker: {error}", file=sys.stderr)
        return EXIT_CONFIG
    if args.check:
        print("worker: configuration OK")
        return EXIT_OK
    try:
        asyncio.run(serve(settings))
    except (BrokerUnavailable, TopologyError) as error:
        structlog.get_logger("worker").error("cannot start", error=str(error))
        return EXIT_BROKER
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
