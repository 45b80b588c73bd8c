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
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

import structlog

import warren_cron.tracing as tracing
from warren_cron.background import beside
from warren_cron.errors import BrokerUnavailable, SettingsError, TopologyError
from warren_cron.runtime.probes import Check, Pulse, ever, probe_checks
from warren_cron.runtime.probes import Checks as Checks
from warren_cron.runtime.process_args import process_parser as process_parser

if TYPE_CHECKING:  # the server module loads only with the metrics it serves
    from wsgiref.simple_server import WSGIServer

EXIT_OK = 0
EXIT_CONFIG = 2
EXIT_BROKER = 3


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


def start_metrics(
    port: int, checks: Checks, live: Checks | None = None, started: Check | None = None
) -> WSGIServer | None:
    """Serve /metrics, /healthz and /readyz from ``checks``, /livez from ``live`` and
    /startupz from ``started`` (by default ``ever(checks)``; ``runtime/probes.py``);
    prometheus-client loads only when a port is set."""
    if port == 0:
        return None
    from warren_cron.runtime.metrics import Health, serve_metrics

    def health(named: Checks) -> Health:
        built = Health()
        for name, check in named.items():
            built.add(name, check)
        return built

    named_probes = probe_checks(checks, live or {}, started or ever(checks))
    probes = {path: health(named) for path, named in named_probes.items()}
    try:
        return serve_metrics(port, health(checks), probes=probes)
    except OSError as error:
        raise port_taken("CRON_METRICS_PORT", f"port {port}", error) from None


async def run_service(service: Service, metrics_port: int, checks: Checks) -> None:
    """Run ``service`` with its metrics and probes (``checks`` its readiness; its liveness the
    event loop's pulse); SIGTERM and SIGINT call its ``stop``."""
    started = ever(checks)
    pulse = Pulse(watch=started)
    server = start_metrics(metrics_port, checks, {"event-loop": pulse.alive}, started)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, service.stop)
    try:
        async with beside(pulse.run()):
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
