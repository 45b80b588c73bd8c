"""Tracing's configuration and its publish side, without a broker: when it is on, what a fire
and an enqueue carry, and that warren runs without the ``otel`` extra."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import warren_cron.tracing as tracing
from tests.helpers import envelope
from warren_cron.codec import fire_outgoing, task_message
from warren_cron.errors import SettingsError
from warren_cron.otel_tracing import run_ids

ROOT = Path(__file__).resolve().parent.parent
ENDPOINT = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        (ENDPOINT, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "true"}, False),
        ({**ENDPOINT, "OTEL_SDK_DISABLED": "TRUE"}, False),
        ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_SERVICE_NAME": "billing"}, False),
    ],
)
def test_tracing_is_on_only_when_an_otlp_endpoint_or_exporter_is_set(
    env: dict[str, str], on: bool
) -> None:
    """Off unless configured: a service name alone does not turn it on, disabling wins."""
    assert tracing.wanted(env) is on


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({**ENDPOINT, "OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER='zipkin'"),
        ({**ENDPOINT, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"),
        ({**ENDPOINT, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "TRACES_PROTOCOL"),
    ],
)
def test_an_exporter_warren_cannot_use_is_a_settings_error(
    env: dict[str, str], named: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only OTLP over HTTP: anything else asked for is refused by name, not ignored; a
    client's every enqueue says so, rather than only its first."""
    with pytest.raises(SettingsError, match=named):
        tracing.configure(env=env)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    for _ in range(2):
        with pytest.raises(SettingsError, match=named):
            task_message(envelope("report"))
    monkeypatch.undo()
    assert not tracing.configure()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on in this process, its spans kept in memory."""
    kept = InMemorySpanExporter()
    assert tracing.configure("warren-test", env=ENDPOINT, export=kept)
    yield kept
    tracing.shutdown()


def test_a_fire_carries_the_traceparent_of_its_runs_first_span(
    spans: InMemorySpanExporter,
) -> None:
    """The fire's headers name a trace and span derived from the run id: the span exported."""
    outgoing = fire_outgoing("tasks", "1s", b"{}", "nightly@2026-01-01T00:00:00Z", "nightly")
    tracing.shutdown()
    _version, trace_id, span_id, flags = outgoing.headers["traceparent"].split("-")
    derived = run_ids("nightly@2026-01-01T00:00:00Z")
    assert (int(trace_id, 16), int(span_id, 16), int(flags, 16) & 1) == (*derived, 1)
    [fire] = spans.get_finished_spans()
    assert fire.name == "warren.fire nightly"
    assert fire.context is not None and fire.context.span_id == derived[1]
    assert dict(fire.attributes or {}) == {
        "warren.run_id": "nightly@2026-01-01T00:00:00Z",
        "warren.schedule": "nightly",
    }


def test_an_enqueue_inside_a_callers_span_links_to_it_in_a_trace_of_its_own(
    spans: InMemorySpanExporter,
) -> None:
    """The caller's trace is linked, not joined: a run's trace id is always its own."""
    caller = TracerProvider()
    caller.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    with caller.get_tracer("app").start_as_current_span("request") as request:
        message = task_message(envelope("report", {"a": 1}, run_id="r-linked"))
    tracing.shutdown()
    [enqueue] = spans.get_finished_spans()
    assert enqueue.context is not None and enqueue.context.trace_id == run_ids("r-linked")[0]
    assert [link.context.span_id for link in enqueue.links] == [request.get_span_context().span_id]
    assert message.headers is not None
    assert str(message.headers["traceparent"]).split("-")[1] == f"{run_ids('r-linked')[0]:032x}"


def test_a_senders_own_traceparent_wins_over_the_enqueue(spans: InMemorySpanExporter) -> None:
    """A header the sender gives (its own trace) is the message's, as with any extra header."""
    theirs = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    message = task_message(envelope("report"), {"traceparent": theirs})
    assert message.headers is not None and message.headers["traceparent"] == theirs


def test_with_tracing_off_a_message_has_no_trace_header() -> None:
    """Off: the fire's and the enqueue's headers are what they were before tracing existed."""
    assert not tracing.configure(env={})
    fire = fire_outgoing("tasks", "1s", b"{}", "r-1", "nightly")
    enqueued = task_message(envelope("report"))
    assert set(fire.headers) == {"cron-run-id", "cron-schedule"}
    assert enqueued.headers is not None and "traceparent" not in enqueued.headers
    assert trace.get_current_span().get_span_context().is_valid is False


BLOCK_OTEL = """
import sys

class NoOtel:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "opentelemetry":
            raise ImportError(f"No module named {name!r}")
        return None

sys.meta_path.insert(0, NoOtel())
"""


def run_without_otel(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a process where OpenTelemetry cannot be imported."""
    return subprocess.run(
        [sys.executable, "-c", BLOCK_OTEL + code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_warren_runs_without_the_extra_and_loads_none_of_it_when_off() -> None:
    """Tracing off: a fire, an enqueue and the worker's modules import no OpenTelemetry."""
    code = """
import warren_cron.worker.consumer, warren_cron.scheduler.publisher
from warren_cron.codec import fire_outgoing
import warren_cron.tracing as tracing
assert not tracing.configure()
assert "traceparent" not in fire_outgoing("tasks", "1s", b"{}", "r-1", "nightly").headers
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""
    result = run_without_otel(code, {"PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_a_worker_configured_for_tracing_without_the_extra_says_what_to_install() -> None:
    """OTEL endpoint set, extra missing: the worker exits 2 naming warren-cron[otel]."""
    code = "from warren_cron.worker.__main__ import main; sys.exit(main([]))"
    env = {"PATH": "/usr/bin:/bin", **ENDPOINT, "CRON_AMQP_URL": "amqp://guest:guest@127.0.0.1:9/"}
    result = run_without_otel(code, env)
    assert result.returncode == 2, result.stderr
    assert "warren-cron[otel]" in result.stderr and "OTEL_SDK_DISABLED" in result.stderr
