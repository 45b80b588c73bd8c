"""What tracing does with the OpenTelemetry SDK (the ``otel`` extra), configured by the
standard ``OTEL_*`` variables; ``warren_cron.tracing`` is the only caller.

A run's trace id and the span id of its first span are derived from its run id (SHA-256), so
that every process names the same trace for a run even where a message lost its
``traceparent``: a record replayed from before tracing was on, a message sent by hand.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from warren_cron.envelope import Envelope
from warren_cron.errors import SettingsError
from warren_cron.headers import H_RUN_ID, text
from warren_cron.tracing import TRACEPARENT, TRACESTATE

#: Ids the next span takes (a run's first span), set around its start only.
_NEXT: ContextVar[tuple[int, int] | None] = ContextVar("warren_next_span_ids", default=None)
#: The fates that fail an attempt: its span's status is ERROR.
FAILING = frozenset({"retrying", "failed"})
PROTOCOLS = ("", "http/protobuf")


def run_ids(run_id: str) -> tuple[int, int]:
    """The trace id of a run and the span id of its first span, from its run id."""
    digest = hashlib.sha256(run_id.encode()).digest()
    # All-zero ids are invalid; SHA-256 gives one once in 2**64 runs.
    return int.from_bytes(digest[:16]) or 1, int.from_bytes(digest[16:24]) or 1


def run_context(run_id: str) -> Context:
    """A context whose remote parent is the run's first span, as ``run_ids`` names it."""
    trace_id, span_id = run_ids(run_id)
    parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(1))
    return trace.set_span_in_context(NonRecordingSpan(parent), Context())


class RunIds(IdGenerator):
    """Random ids, but for a run's first span: the ids ``run_ids`` derives."""

    def __init__(self) -> None:
        self._random = RandomIdGenerator()

    def generate_trace_id(self) -> int:
        """The run's trace id while its first span starts, else a random one."""
        ids = _NEXT.get()
        return self._random.generate_trace_id() if ids is None else ids[0]

    def generate_span_id(self) -> int:
        """The run's first span id while it starts, else a random one."""
        ids = _NEXT.get()
        return self._random.generate_span_id() if ids is None else ids[1]

    def is_trace_id_random(self) -> bool:
        """SHA-256 of a run id is as uniform as random bits: ratio samplers stay fair."""
        return True


def exporter(env: Mapping[str, str]) -> SpanExporter:
    """The OTLP over HTTP exporter, which reads its endpoint, headers and timeout from the
    ``OTEL_EXPORTER_OTLP_*`` variables; ``SettingsError`` for anything else asked for."""
    kind = env.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() or "otlp"
    if kind != "otlp":
        raise SettingsError(
            f"OTEL_TRACES_EXPORTER={kind!r}: warren exports traces with otlp only (or none)"
        )
    for name in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = env.get(name, "").strip().lower()
        if protocol not in PROTOCOLS:
            raise SettingsError(
                f"{name}={protocol!r}: warren sends OTLP over HTTP only; set http/protobuf"
            )
    # Its other settings (headers, timeout, compression, TLS) it reads from the process's
    # environment, as every OTLP exporter does.
    return OTLPSpanExporter(endpoint=endpoint(env))


def endpoint(env: Mapping[str, str]) -> str | None:
    """Where spans are sent, as the OTLP exporter reads it (None: its default, port 4318)."""
    traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return f"{base.rstrip('/')}/v1/traces" if base else None


class Tracing:
    """This process's tracer provider, and the spans of runs."""

    def __init__(
        self, service: str, env: Mapping[str, str], export: SpanExporter | None = None
    ) -> None:
        # OTEL_SERVICE_NAME wins over the process's own name; OTEL_RESOURCE_ATTRIBUTES adds.
        named = env.get("OTEL_SERVICE_NAME", "").strip() or service
        resource = Resource.create({SERVICE_NAME: named})
        # The sampler is the SDK's from OTEL_TRACES_SAMPLER (default: parent-based, always on).
        self._provider = TracerProvider(resource=resource, id_generator=RunIds())
        self._provider.add_span_processor(BatchSpanProcessor(export or exporter(env)))
        self._tracer = self._provider.get_tracer("warren_cron")
        self._propagator = TraceContextTextMapPropagator()

    def install(self) -> None:
        """Make this provider the process's global one: a handler's spans nest in its attempt."""
        trace.set_tracer_provider(self._provider)

    def shutdown(self) -> None:
        """Export the spans still buffered, then stop."""
        self._provider.shutdown()

    def published(
        self, run_id: str, kind: str, schedule: str | None, task: str | None
    ) -> dict[str, str]:
        """Start and end the run's first span (its fire or enqueue); its trace headers."""
        attributes = _attributes(run_id, schedule, task)
        caller = trace.get_current_span().get_span_context()
        links = [Link(caller)] if caller.is_valid else None
        token = _NEXT.set(run_ids(run_id))
        try:
            name = f"warren.{kind} {schedule or task or ''}".rstrip()
            span = self._tracer.start_span(name, Context(), SpanKind.PRODUCER, attributes, links)
        finally:
            _NEXT.reset(token)
        span.end()
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier, trace.set_span_in_context(span))
        return carrier

    def attempt(self, headers: Mapping[str, Any], run_id: str | None, number: int) -> AttemptSpan:
        """The span of one attempt, child of the run's trace."""
        span = self._tracer.start_span(
            "warren.attempt",
            self.parent(headers, run_id),
            SpanKind.CONSUMER,
            {"warren.attempt": number, **_attributes(run_id, None, None)},
            record_exception=False,
            set_status_on_exception=False,
        )
        return AttemptSpan(span)

    def parent(self, headers: Mapping[str, Any], run_id: str | None) -> Context:
        """The run's context from a message's ``traceparent``; one that is missing or
        malformed is ignored, and the run's derived context stands instead."""
        carrier = {
            name: text(value)
            for name in (TRACEPARENT, TRACESTATE)
            if (value := headers.get(name)) is not None
        }
        if carrier:
            found = self._propagator.extract(carrier, Context())
            if trace.get_current_span(found).get_span_context().is_valid:
                return found
        # A message without a message id may still name its run in ``cron-run-id``.
        named = headers.get(H_RUN_ID)
        run_id = run_id or (None if named is None else text(named))
        return Context() if run_id is None else run_context(run_id)

    def outgoing(self) -> dict[str, str]:
        """The trace headers of the current span, for a request it sends."""
        carrier: dict[str, str] = {}
        if trace.get_current_span().get_span_context().is_valid:
            self._propagator.inject(carrier)
        return carrier

    def ids(self) -> tuple[str, str] | None:
        """Trace and span id of the current span, in hex; None when there is none."""
        found = trace.get_current_span().get_span_context()
        if not found.is_valid:
            return None
        return trace.format_trace_id(found.trace_id), trace.format_span_id(found.span_id)

    def trace_id(self) -> str | None:
        """The current span's trace id in hex, or None."""
        ids = self.ids()
        return None if ids is None else ids[0]


class AttemptSpan:
    """One attempt's span: current from ``__enter__`` to ``__exit__``, then ended."""

    __slots__ = ("_span", "_token")

    def __init__(self, span: trace.Span) -> None:
        self._span = span
        self._token: object = None

    def __enter__(self) -> AttemptSpan:
        self._token = otel_context.attach(trace.set_span_in_context(self._span))
        return self

    def __exit__(self, *exc: object) -> None:
        otel_context.detach(self._token)  # type: ignore[arg-type]
        self._span.end()

    def ended(
        self, envelope: Envelope | None, outcome: str, reason: str, status: int | None
    ) -> None:
        """Name the span after its task; outcome, reason, HTTP status; ERROR on failure."""
        span = self._span
        if envelope is not None:
            span.update_name(f"warren.attempt {envelope.task}")
            span.set_attributes(_attributes(None, envelope.schedule, envelope.task))
        span.set_attribute("warren.outcome", outcome)
        span.set_attribute("warren.reason", reason)
        if status is not None:
            span.set_attribute("http.response.status_code", status)
        if outcome in FAILING:
            span.set_status(Status(StatusCode.ERROR, reason))


def _attributes(run_id: str | None, schedule: str | None, task: str | None) -> dict[str, str]:
    found = {"warren.run_id": run_id, "warren.schedule": schedule, "warren.task": task}
    return {key: value for key, value in found.items() if value is not None}
