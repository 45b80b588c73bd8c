"""Prometheus metrics and the health answers of every long-running process.

Each process serves ``/metrics``, ``/healthz`` and the probes ``/livez``, ``/readyz`` and
``/startupz`` on ``CRON_METRICS_PORT`` (0 turns the server off). Each answer is a set of
named checks registered by the process (``runtime/probes.py`` says which); it is 200 when all
pass and 503 naming the failing ones, e.g. a worker whose consumer the broker cancelled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import orjson
from prometheus_client import Counter, Gauge, Histogram, make_wsgi_app

ATTEMPTS = Counter("cron_attempts", "Attempts by task and outcome.", ["task", "outcome"])
ATTEMPT_SECONDS = Histogram(
    "cron_attempt_duration_seconds",
    "Duration of one attempt.",
    ["task"],
    buckets=(0.005, 0.025, 0.1, 0.5, 1, 5, 30, 120, 600),
)
BREAKER_STATE = Gauge(
    "cron_breaker_state",
    "Circuit of each http destination as this worker sees it: 0 closed, 1 half-open, 2 open.",
    ["destination"],
)
BUDGET_REFUSED = Counter(
    "cron_retry_budget_refused",
    "Retries refused because the http destination's retry budget was spent.",
    ["destination"],
)
LIMIT_WAITS = Counter(
    "cron_flow_deferred",
    "Attempts deferred by flow control (reason circuit-open, concurrency-limit or rate-limit), "
    "by key; past 100 keys a worker counts the others under the key 'other'.",
    ["reason", "key"],
)
RETRIES = Counter("cron_retries", "Attempts handed to a retry queue.", ["task"])
FAILED = Counter("cron_failed", "Tasks sent to the failed queue.", ["task", "reason"])
FIRE_LAG = Histogram(
    "cron_fire_lag_seconds",
    "Scheduled time to publish confirmed, and to handler start.",
    ["stage"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30),
)
MISSED_FIRES = Counter("cron_missed_fires", "Fires skipped by the catch-up policy.", ["schedule"])
FIRES = Counter("cron_fires", "Fires published and confirmed.", ["schedule"])
LEADING = Gauge("cron_scheduler_leading", "1 while this scheduler leads, 0 standing by.")
SCHEDULERS = Gauge(
    "cron_schedulers", "Schedulers beating, by role, as the monitor sees them.", ["role"]
)
SCHEDULER_LAG = Gauge(
    "cron_scheduler_lag_seconds",
    "How far the leading scheduler is behind its fires, from its beats (monitor).",
)
QUEUE_DEPTH = Gauge(
    "cron_queue_depth", "Ready messages per queue, polled by the monitor.", ["queue"]
)
HISTORY_EVENTS = Counter("cron_history_events", "History events the stream confirmed.", ["process"])
HISTORY_DROPPED = Counter(
    "cron_history_events_dropped",
    "History events dropped because the stream could not take them.",
    ["process"],
)
HISTORY_LOST = Counter(
    "cron_history_events_lost",
    "History events the fleet's processes reported dropping, from the monitor's history fold.",
    ["process"],
)
ALERTS = Counter("cron_alerts", "Alerts sent by the monitor.", ["kind"])
LAST_SUCCESS = Gauge(
    "cron_schedule_last_success_timestamp_seconds",
    "When the schedule's last successful run ended (Unix time), from the monitor's history fold.",
    ["schedule"],
)
LAST_FAILURE = Gauge(
    "cron_schedule_last_failure_timestamp_seconds",
    "When the schedule's last failed run ended (Unix time), from the monitor's history fold.",
    ["schedule"],
)
PAUSED = Gauge("cron_schedule_paused", "1 while the schedule is paused, else 0.", ["schedule"])

Check = Callable[[], bool]
StartResponse = Callable[..., Any]


class Health:
    """Named checks; healthy when every one passes."""

    def __init__(self) -> None:
        self._checks: dict[str, Check] = {}

    def add(self, name: str, check: Check) -> None:
        """Register a check such as ``broker-connection`` or ``consumer``."""
        self._checks[name] = check

    def failing(self) -> list[str]:
        """Names of the checks that fail now."""
        failing = []
        for name, check in self._checks.items():
            try:
                ok = check()
            except Exception:
                ok = False
            if not ok:
                failing.append(name)
        return failing


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every few seconds would flood the log."""


def health_app(
    health: Health, probes: Mapping[str, Health] | None = None
) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    """WSGI app: ``/healthz`` from ``health``, each path of ``probes`` (``/livez``...) from
    its own checks, everything else Prometheus metrics."""
    metrics = make_wsgi_app()
    answers = {"/healthz": health, **(probes or {})}

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        checks = answers.get(environ.get("PATH_INFO", ""))
        if checks is None:
            return metrics(environ, start_response)  # type: ignore[no-any-return]
        failing = checks.failing()
        status = "200 OK" if not failing else "503 Service Unavailable"
        body = orjson.dumps({"healthy": not failing, "failing": failing})
        start_response(status, [("Content-Type", "application/json")])
        return [body]

    return app


def serve_metrics(
    port: int,
    health: Health,
    host: str = "0.0.0.0",  # noqa: S104 - scraped and probed from other containers
    probes: Mapping[str, Health] | None = None,
) -> WSGIServer | None:
    """Serve ``/metrics``, ``/healthz`` and ``probes`` in a daemon thread; ``port`` 0 serves
    nothing."""
    if port == 0:
        return None
    app = health_app(health, probes)
    server = make_server(host, port, app, _Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server
