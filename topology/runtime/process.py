"""What the long-running processes' entry points share: command line, exit codes, start-up
errors, signals.

``warren worker``, ``warren scheduler`` and ``warren monitor`` each build their
command line with ``process_parser`` (``process_args.py``) and load their own settings, then
hand the service to ``run_service`` inside ``run_process``.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import structlog

import warren_cron.tracing as tracing
from warren_cron.errors import BrokerUnavailable, SettingsError, TopologyError
from warren_cron.runtime.process_args import process_parser as process_parser

if TYPE_CHECKING:  # the server module loads only with the metrics it serves
    from wsgiref.simple_server import WSGIServer

EXIT_OK = 0
EXIT_CONFIG = 2
EXIT_BROKER = 3

#: Named checks that ``/healthz`` reports, e.g. ``{"broker-connection": worker.connected}``.
Checks = Mapping[str, Callable[[], bool]]


class Service(Protocol):
    """A process's body: it runs until ``stop`` is called."""

    async def run(self) -> None:
        """Run until stopped."""

    def stop(self) -> None:
        """Ask ``run`` to return, gracefully."""


def config_error(name: str, error: Exception) -> int:
    """Print ``name: error`` on stderr; return the exit code for invalid configuration."""
    print(f"{name}: {error}", file=sys.stderr)
    return EXIT_CONFIG


def config_ok(name: str) -> int:
    """Print that ``--check`` found the configuration valid; return the exit code for it."""
    print(f"{name}: configuration OK")
    return EXIT_OK


def port_taken(variable: str, address: str, error: OSError) -> SettingsError:
    """The error of a port that cannot be listened on: which setting to change, and why."""
    return SettingsError(
        f"{variable}: cannot listen on {address} ({error.strerror or error}): another "
        f"process holds it, or the address is not this host's; stop that process or set "
        f"{variable} to a free port"
    )


def start_metrics(port: int, checks: Checks) -> WSGIServer | None:
    """Serve /metrics and /healthz; prometheus-client loads only when a port is set."""
    if port == 0:
        return None
    from warren_cron.runtime.metrics import Health, serve_metrics

    health = Health()
    for name, check in checks.items():
        health.add(name, check)
    try:
        return serve_metrics(port, health)
    except OSError as error:
        raise port_taken("CRON_METRICS_PORT", f"port {port}", error) from None


async def run_service(service: Service, metrics_port: int, checks: Checks) -> None:
    """Run ``service`` with its metrics server; SIGTERM and SIGINT call its ``stop``."""
    server = start_metrics(metrics_port, checks)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, service.stop)
    try:
        await service.run()
    finally:
        if server is not None:
            server.shutdown()


def run_process(name: str, serve: Coroutine[Any, Any, None]) -> int:
    """Run ``serve`` to the end, traced when ``OTEL_*`` asks (docs/tracing.md); return the
    process exit code."""
    try:
        tracing.configure(f"warren-{name}", install=True)
    except SettingsError as error:
        serve.close()
        return config_error(name, error)
    try:
        asyncio.run(serve)
    except (BrokerUnavailable, TopologyError) as error:
        # The message names the fix; a traceback would bury it.
        structlog.get_logger(name).error("cannot start", error=str(error))
        return EXIT_BROKER
    except SettingsError as error:  # found at start: a port another process holds
        structlog.get_logger(name).error("cannot start", error=str(error))
        return EXIT_CONFIG
    finally:
        # The spans still buffered are sent before the process ends.
        tracing.shutdown()
    return EXIT_OK
