"""OpenTelemetry tracing (``warren-cron[otel]``): off unless the standard ``OTEL_*`` variables
ask for it, and then one trace per run (docs/tracing.md).

This module imports no OpenTelemetry code: with tracing off every hook here is one check of a
module global, and warren runs without the extra installed. ``warren_cron.otel_tracing`` holds
what needs the SDK, imported only once tracing is configured on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, Protocol

from warren_cron.errors import SettingsError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter

    from warren_cron.envelope import Envelope
    from warren_cron.otel_tracing import Tracing

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
#: The service name of a process that configured none of its own (a client's).
DEFAULT_SERVICE = "warren"
#: Read only: returned to every caller with tracing off.
_NONE: Mapping[str, str] = {}

_tracing: Tracing | None = None
_configured = False


def wanted(env: Mapping[str, str]) -> bool:
    """True when ``env`` turns tracing on: an OTLP endpoint or ``OTEL_TRACES_EXPORTER`` set,
    and neither ``OTEL_SDK_DISABLED=true`` nor ``OTEL_TRACES_EXPORTER=none``."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    return bool(exporter or endpoint)


def configure(
    service: str = DEFAULT_SERVICE,
    env: Mapping[str, str] | None = None,
    install: bool = False,
    export: SpanExporter | None = None,
) -> bool:
    """Turn tracing on for this process when ``env`` (the process's environment) asks for it;
    True when on. ``install``: make warren's tracer provider the process's global one, which
    handlers' own spans then use (a worker's). ``export``: where spans go instead of OTLP
    (tests). ``SettingsError`` when tracing is asked for but cannot be (no extra installed,
    an exporter or protocol other than OTLP over HTTP)."""
    global _tracing, _configured
    env = os.environ if env is None else env
    shutdown()
    if not wanted(env):
        _configured = True
        return False
    try:
        from warren_cron.otel_tracing import Tracing
    except ImportError as error:
        raise SettingsError(
            f"tracing is configured (OTEL_* variables) but OpenTelemetry is missing ({error}):"
            " install warren-cron[otel], or unset OTEL_EXPORTER_OTLP_ENDPOINT and"
            " OTEL_TRACES_EXPORTER (or set OTEL_SDK_DISABLED=true)"
        ) from None
    # Left unconfigured when this raises: each later use says the same, not nothing.
    _tracing = Tracing(service, env, export)
    _configured = True
    if install:
        _tracing.install()
    return True


def shutdown() -> None:
    """Send the spans still buffered and turn tracing off (a process's end)."""
    global _tracing, _configured
    tracing, _tracing, _configured = _tracing, None, False
    if tracing is not None:
        tracing.shutdown()


def current() -> Tracing | None:
    """This process's tracing, configured from its environment on first use; None when off."""
    if not _configured:
        configure()
    return _tracing


def published(run_id: str, kind: str, schedule: str | None, task: str | None) -> Mapping[str, str]:
    """The trace headers of a run's task message as it is fired or enqueued (``kind``): the
    ``traceparent`` of the run's first span; empty with tracing off."""
    tracing = _tracing if _configured else current()
    if tracing is None:
        return _NONE
    return tracing.published(run_id, kind, schedule, task)


class Attempt(Protocol):
    """The span of one attempt, told how the attempt ended."""

    def ended(
        self, envelope: Envelope | None, outcome: str, reason: str, status: int | None
    ) -> None:
        """Name the span after the envelope's task (None: no envelope could be read) and
        record the attempt's outcome on it."""

    def __enter__(self) -> Attempt: ...
    def __exit__(self, *exc: object) -> None: ...


class _NoAttempt:
    """The attempt span with tracing off: nothing."""

    __slots__ = ()

    def ended(
        self, envelope: Envelope | None, outcome: str, reason: str, status: int | None
    ) -> None:
        """Nothing to record."""

    def __enter__(self) -> _NoAttempt:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


NO_ATTEMPT = _NoAttempt()


def attempt(headers: Mapping[str, Any], run_id: str | None, number: int) -> Attempt:
    """A context manager: the span of attempt ``number`` of ``run_id``, current while it runs,
    a child of the run's trace (``traceparent`` of ``headers``, else derived from the run id)."""
    tracing = _tracing if _configured else current()
    if tracing is None:
        return NO_ATTEMPT
    return tracing.attempt(headers, run_id, number)


def outgoing() -> Mapping[str, str]:
    """The ``traceparent`` (and ``tracestate``) of the current span, for a request the attempt
    sends; empty with tracing off or no span current."""
    tracing = _tracing
    return _NONE if tracing is None else tracing.outgoing()


def trace_id() -> str | None:
    """The current span's trace id as 32 hex digits; None with tracing off or no span current."""
    tracing = _tracing
    return None if tracing is None else tracing.trace_id()


def add_trace_id(
    _logger: object, _method: str, line: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """A structlog processor: ``trace_id`` and ``span_id`` of the current span on a log line."""
    tracing = _tracing
    if tracing is not None:
        ids = tracing.ids()
        if ids is not None:
            line.setdefault("trace_id", ids[0])
            line.setdefault("span_id", ids[1])
    return line
