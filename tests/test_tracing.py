"""OpenTelemetry tracing end to end: one trace per run, from its enqueue through every attempt,
retry and replay, received by a local OTLP/HTTP receiver; the http task's endpoint sees it."""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import warren_cron.tracing as tracing
from tests.conftest import plan
from tests.failed_records import run_warren
from tests.helpers import envelope, publish, publish_raw, registry, wait_history
from tests.namespace import TestBroker
from tests.otlp_receiver import Receiver, Span, receiving
from tests.scheduling import Process, env_for, every, write_schedules
from tests.webhook import Endpoint, serve
from warren_cron.codec import encode
from warren_cron.faultkit.waits import eventually
from warren_cron.history.events import Event
from warren_cron.otel_tracing import run_ids

pytestmark = pytest.mark.broker
#: Spans leave a process's buffer this often (ms): the test waits for them, not for 5 s.
QUICK_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "100"}
QUERY_SECRET = "q-s3cret-in-query"
HEADER_SECRET = "Bearer h-s3cret-in-header"


def ids_of(run_id: str) -> tuple[str, str]:
    """The trace id of a run and its first span's id, in hex."""
    trace_id, span_id = run_ids(run_id)
    return f"{trace_id:032x}", f"{span_id:016x}"


def traced_env(broker: TestBroker, endpoint: str | None, **extra: str) -> dict[str, str]:
    """A worker's environment: the test's namespace, this OTLP endpoint (None: no tracing)."""
    env = env_for(broker, CRON_QUEUE_TYPE=broker.queue_type)
    env = {k: v for k, v in env.items() if not k.startswith("OTEL_")}
    if endpoint is not None:
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, **QUICK_EXPORT)
    return {**env, **extra}


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """A local OTLP/HTTP receiver."""
    async with receiving() as started:
        yield started


@pytest.fixture
def traced(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tracing on in this process too (its enqueues), exporting to the receiver."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
    assert tracing.configure("warren-test")
    yield
    tracing.shutdown()


async def start_worker(spawn: Any, env: dict[str, str]) -> Process:
    """A real worker process, started."""
    worker: Process = await spawn(["-m", "warren_cron.worker"], env)
    await worker.wait_event("worker started")
    return worker


def attempts_of(receiver: Receiver, trace_id: str) -> list[Span]:
    """The attempt spans of one trace, by attempt number."""
    found = [span for span in receiver.of_trace(trace_id) if span.name.startswith("warren.att")]
    return sorted(found, key=lambda span: span.attributes["warren.attempt"])


def parent_of(traceparent: str) -> tuple[str, str]:
    """Trace id and parent span id of a ``traceparent`` header."""
    _version, trace_id, span_id, _flags = traceparent.split("-")
    return trace_id, span_id


async def test_a_run_retried_twice_is_one_trace_of_three_attempts_the_endpoint_shares(
    broker: TestBroker, receiver: Receiver, traced: None, spawn: Any
) -> None:
    """Enqueue, 500, 500, 200: one trace holds the enqueue span and three attempt spans (ERROR,
    ERROR, then the success) under it; each request's traceparent names its attempt's span;
    the worker's log lines and history events carry the trace id; no secret in any span."""
    worker = await start_worker(spawn, traced_env(broker, receiver.url))
    with serve(Endpoint(statuses=[500, 500, 200])) as endpoint:
        url = f"{endpoint.url}/hook?token={QUERY_SECRET}"
        payload = {"url": url, "headers": {"Authorization": HEADER_SECRET}}
        env = envelope("http", payload)
        await publish(broker, env, plan(50, 50, 50))
        trace_id, first_span = ids_of(env.run_id)
        await eventually(lambda: len(attempts_of(receiver, trace_id)) == 3, 20, what="3 spans")
    assert await worker.stop() == 0
    [enqueue] = [span for span in receiver.of_trace(trace_id) if span.name.startswith("warren.e")]
    assert (enqueue.span_id, enqueue.parent_id, enqueue.service) == (first_span, "", "warren-test")
    assert len(receiver.of_trace(trace_id)) == 4
    attempts = attempts_of(receiver, trace_id)
    assert [s.attributes["warren.outcome"] for s in attempts] == [
        "retrying",
        "retrying",
        "succeeded",
    ]
    assert [s.status for s in attempts] == ["ERROR", "ERROR", "UNSET"]
    assert [s.attributes["http.response.status_code"] for s in attempts] == [500, 500, 200]
    assert {(s.name, s.parent_id, s.service) for s in attempts} == {
        ("warren.attempt http", first_span, "warren-worker")
    }
    assert {s.attributes["warren.run_id"] for s in attempts} == {env.run_id}
    sent = [parent_of(headers["traceparent"]) for _, headers, _ in endpoint.requests]
    assert sent == [(trace_id, s.span_id) for s in attempts]
    logged = {line.get("trace_id") for line in worker.named("attempt")}
    assert logged == {trace_id}
    events = await wait_history(broker, lambda e: len(ended(e, env.run_id)) == 3, "3 attempts")
    assert {event.get("trace_id") for event in ended(events, env.run_id)} == {trace_id}
    shown = orjson.dumps([(s.name, s.attributes, s.status_message) for s in receiver.spans])
    for secret in (QUERY_SECRET, HEADER_SECRET, "h-s3cret"):
        assert secret.encode() not in shown


async def test_a_handlers_own_span_and_log_lines_are_in_its_attempt(
    broker: TestBroker, receiver: Receiver, spawn: Any
) -> None:
    """The worker's tracer provider is the process's: a span the handler makes with the
    OpenTelemetry API is a child of the attempt's, and its log lines carry the trace id."""
    env_vars = traced_env(broker, receiver.url, CRON_HANDLER_MODULES="tests.traced_handlers")
    worker = await start_worker(spawn, env_vars)
    env = envelope("traced_child", None)
    await publish(broker, env, plan(50))
    trace_id, _ = ids_of(env.run_id)
    await eventually(lambda: len(receiver.of_trace(trace_id)) == 2, 20, what="2 spans")
    assert await worker.stop() == 0
    [attempt] = attempts_of(receiver, trace_id)
    [child] = [span for span in receiver.of_trace(trace_id) if span.name == "child"]
    assert child.parent_id == attempt.span_id
    for line in ("child via structlog", "child via logging"):
        [logged] = worker.named(line)
        assert (logged["trace_id"], logged["span_id"]) == (trace_id, child.span_id)


async def test_a_fired_run_is_traced_from_its_fire(
    broker: TestBroker,
    receiver: Receiver,
    traced: None,
    schedulers: Any,
    run_worker: Any,
    tmp_path: Path,
) -> None:
    """A schedule's fire starts its run's trace: the scheduler's fire span is the parent of
    the attempt of the same run, in the trace its run id names."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1s", retry="{ max_retries = 1, delay_ms = 100 }"))
    await run_worker()
    await schedulers.start(path)
    await eventually(lambda: receiver.named("warren.attempt noop"), 20, what="an attempt span")
    attempt = receiver.named("warren.attempt noop")[0]
    run_id = attempt.attributes["warren.run_id"]
    trace_id, first_span = ids_of(run_id)
    fires = receiver.named
    await eventually(lambda: [s for s in fires("warren.fire") if s.trace_id == trace_id], 20)
    [fire] = [span for span in receiver.named("warren.fire tick") if span.trace_id == trace_id]
    assert (
        (attempt.trace_id, attempt.parent_id)
        == (trace_id, first_span)
        == (
            fire.trace_id,
            fire.span_id,
        )
    )
    assert fire.attributes == {"warren.run_id": run_id, "warren.schedule": "tick"}


def ended(events: list[Event], run_id: str) -> list[Event]:
    """The ``attempt`` events of one run."""
    return [e for e in events if e.type == "attempt" and e.run_id == run_id]


async def test_a_replayed_run_stays_in_its_trace(
    broker: TestBroker, receiver: Receiver, traced: None, spawn: Any
) -> None:
    """A 404 sends the run to the failed queue; ``warren failed replay`` runs it again: the
    replayed attempt is in the same trace, under the same enqueue span."""
    worker = await start_worker(spawn, traced_env(broker, receiver.url))
    with serve(Endpoint(statuses=[404, 200])) as endpoint:
        env = envelope("http", {"url": f"{endpoint.url}/hook"})
        await publish(broker, env, plan(50))
        trace_id, first_span = ids_of(env.run_id)
        await broker.wait_depth(broker.names.failed_queue, 1)
        [record] = await broker.get_all(broker.names.failed_queue)
        assert parent_of(record.headers["traceparent"])[0] == trace_id
        replayed = run_warren(broker, "failed", "replay", "--all")
        assert replayed.returncode == 0, replayed.stderr
        await eventually(lambda: len(attempts_of(receiver, trace_id)) == 2, 20, what="2 spans")
    assert await worker.stop() == 0
    first, again = attempts_of(receiver, trace_id)
    assert (first.attributes["warren.outcome"], again.attributes["warren.outcome"]) == (
        "failed",
        "succeeded",
    )
    assert first.parent_id == again.parent_id == first_span
    assert [parent_of(h["traceparent"])[0] for _, h, _ in endpoint.requests] == [trace_id] * 2


@pytest.mark.parametrize(
    "otel",
    [
        {},
        {"OTEL_SDK_DISABLED": "true"},
        {"OTEL_TRACES_EXPORTER": "none"},
    ],
    ids=["unset", "sdk-disabled", "exporter-none"],
)
async def test_tracing_off_sends_no_traceparent_and_no_span(
    broker: TestBroker, receiver: Receiver, spawn: Any, otel: dict[str, str]
) -> None:
    """Without an OTLP endpoint, or with one but tracing turned off, the endpoint gets no
    traceparent and the receiver no span, from the worker or from the enqueue."""
    asked = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, **otel} if otel else {}
    assert not tracing.configure(env=asked)
    env_vars = traced_env(broker, receiver.url if otel else None, **otel)
    worker = await start_worker(spawn, env_vars)
    try:
        with serve(Endpoint(statuses=[500, 200])) as endpoint:
            env = envelope("http", {"url": f"{endpoint.url}/hook"})
            await publish(broker, env, plan(50))
            await eventually(lambda: len(endpoint.requests) == 2, 20, what="2 requests")
    finally:
        tracing.shutdown()
    assert await worker.stop() == 0
    sent = {name.lower() for _, headers, _ in endpoint.requests for name in headers}
    assert not {"traceparent", "tracestate"} & sent
    assert (receiver.posts, receiver.spans) == (0, [])
    assert all("trace_id" not in line for line in worker.named("attempt"))


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_receiver_that_is_down_changes_no_fate(broker: TestBroker, spawn: Any) -> None:
    """Spans that cannot be exported are dropped: the run is retried and succeeds as without
    tracing, the endpoint still gets its traceparent, and the worker stops in time."""
    down = f"http://127.0.0.1:{closed_port()}"
    worker = await start_worker(spawn, traced_env(broker, down, OTEL_EXPORTER_OTLP_TIMEOUT="1"))
    with serve(Endpoint(statuses=[500, 200])) as endpoint:
        env = envelope("http", {"url": f"{endpoint.url}/hook"})
        await publish(broker, env, plan(50))
        await worker.wait_event("attempt", 2, timeout=20)
    assert [line["outcome"] for line in worker.named("attempt")] == ["retrying", "succeeded"]
    trace_id, _ = ids_of(env.run_id)
    assert [parent_of(h["traceparent"])[0] for _, h, _ in endpoint.requests] == [trace_id] * 2
    assert await worker.stop(timeout=30) == 0
    assert await broker.depth(broker.names.failed_queue) == 0


MALFORMED: list[Any] = [
    "garbage",
    "00-" + "0" * 32 + "-" + "0" * 16 + "-01",  # all-zero ids are invalid
    "ff-" + "a" * 32 + "-" + "b" * 16 + "-01",  # version ff is forbidden
    ["00-" + "a" * 32 + "-" + "b" * 16 + "-01"],  # a list, not text
    {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"},
    12345,
    "00-" + "c" * 32 + "-" + "d" * 16 + "-01" + "x" * 100_000,
]


async def test_a_malformed_traceparent_is_ignored(
    broker: TestBroker, receiver: Receiver, traced: None, run_worker: Any
) -> None:
    """A message whose traceparent is garbage, invalid, not text or huge runs as usual, in its
    run's own trace (derived from its run id), its handler inside the attempt's span."""
    seen: dict[str, str | None] = {}

    async def handler(payload: Any, ctx: Any) -> None:
        seen[ctx.run_id] = tracing.trace_id()

    await run_worker(registry(traced_task=handler))
    run_ids_sent = []
    for number, header in enumerate(MALFORMED):
        env = envelope("traced_task", None, run_id=f"malformed-{number}-{os.getpid()}")
        run_ids_sent.append(env.run_id)
        headers = {"traceparent": header, "cron-run-id": env.run_id}
        await publish_raw(broker, encode(env), plan(50).key, headers=headers, message_id=env.run_id)
    await eventually(lambda: len(seen) == len(MALFORMED), 20, what="every task run")
    for run_id in run_ids_sent:
        trace_id, first_span = ids_of(run_id)
        assert seen[run_id] == trace_id
        await eventually(lambda: len(receiver.named("warren.attempt")) >= len(MALFORMED), 20)
        [span] = attempts_of(receiver, trace_id)
        assert (span.parent_id, span.attributes["warren.outcome"]) == (first_span, "succeeded")
