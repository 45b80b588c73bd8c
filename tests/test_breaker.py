"""The circuit breaker per http destination: opens on the fleet's error rate, defers attempts
without spending them while open, closes when a probe succeeds."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.conftest import plan
from tests.helpers import envelope, publish
from tests.namespace import TestBroker
from tests.webhook import Endpoint, serve
from warren_cron.client import Client
from warren_cron.clock import utcnow
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.waits import eventually
from warren_cron.worker.attempt import Outcome, Result
from warren_cron.worker.breaker import Breaker, BreakerConfig, State
from warren_cron.worker.fleet import Report, read_report
from warren_cron.worker.flow import cause, destination

CONFIG = BreakerConfig(error_rate=0.5, window_seconds=10, min_volume=4, open_seconds=5)
DEST = "http://api.example:80"
#: Settings of a worker whose breaker reacts within seconds.
QUICK = {
    "breaker_enabled": True,
    "breaker_min_volume": 4,
    "breaker_window_seconds": 30,
    "breaker_open_seconds": 2,
    "breaker_error_rate": 0.5,
}


def test_a_destination_is_scheme_host_and_port_in_the_host_scope() -> None:
    """Paths and queries do not split a host destination; default ports are spelled out."""
    assert destination("http://api.example/a?x=1") == destination("http://api.example:80/b")
    assert destination("https://api.example/") == "https://api.example:443"
    assert destination("ftp://x/") is None and destination("::nonsense") is None


def test_a_destination_is_the_url_without_its_query_in_the_endpoint_scope() -> None:
    """Each path is a destination of its own; the query, user info and fragment, where tokens
    hide, are never part of it."""
    a = destination("https://u:pw@api.example/cron/a?token=SECRET#x", "endpoint")
    assert a == "https://api.example:443/cron/a"
    assert destination("http://api.example:80/cron/b", "endpoint") == "http://api.example:80/cron/b"
    assert destination("http://api.example", "endpoint") == "http://api.example:80/"
    assert destination("ftp://x/", "endpoint") is None


def test_an_open_circuit_says_which_failures_opened_it() -> None:
    """The causes the fleet reported over the window, most frequent first, with the counts."""
    breaker = Breaker(CONFIG)
    breaker.heard(DEST, 2, 1, now=100.0, causes={"timeout": 1})
    assert breaker.opened_by(DEST) == ""
    breaker.heard(DEST, 0, 3, now=101.0, causes={"HTTP 503": 3})
    assert breaker.opened_by(DEST) == (
        "opened by 4 of 6 attempts failing over 10 s, HTTP 503 x3, timeout x1"
    )


@pytest.mark.parametrize(
    ("result", "said"),
    [
        (
            Result(Outcome.RETRYABLE, "exception", "HttpStatusError: HTTP 503 from ...", 503),
            "HTTP 503",
        ),
        (Result(Outcome.RETRYABLE, "timeout", "HttpTimeout: no complete answer"), "timeout"),
        (
            Result(
                Outcome.RETRYABLE, "exception", "RetryableError: ClientConnectorError calling x"
            ),
            "ClientConnectorError",
        ),
        (Result(Outcome.RETRYABLE, "exception", "not a type: at all"), "exception"),
    ],
)
def test_a_failures_cause_is_its_status_a_timeout_or_the_network_errors_type(
    result: Result, said: str
) -> None:
    """What an open circuit names: the status, a timeout, or which network error it was."""
    assert cause(result) == said


def test_a_report_carries_the_causes_of_this_workers_errors() -> None:
    """Errors are shared with their cause; a malformed or oversized cause is left out."""
    breaker = Breaker(CONFIG)
    breaker.ended(DEST, ok=False, now=100.0, cause="HTTP 503")
    breaker.ended(DEST, ok=True, now=100.0)
    assert breaker.report(100.0) == ({DEST: [1, 1]}, [], {DEST: {"HTTP 503": 1}})
    body = b'{"breaker": {"d": [0, 3]}, "causes": {"d": {"HTTP 503": 2, "x": "y", "%s": 1}}}'
    assert read_report(body % (b"z" * 65)).causes == {"d": {"HTTP 503": 2}}


def test_a_closed_circuit_with_an_empty_window_is_forgotten() -> None:
    """Endpoints called once leave nothing behind once their counts leave the window."""
    breaker = Breaker(CONFIG)
    breaker.heard("http://x:80/once", 1, 0, now=100.0)
    breaker.report(105.0)
    assert "http://x:80/once" in breaker._circuits
    breaker.report(111.0)
    assert breaker._circuits == {}


def test_the_circuit_opens_only_past_the_rate_with_enough_volume() -> None:
    """Three errors out of three are too few; four out of six (over 50 %) open it."""
    breaker = Breaker(CONFIG)
    breaker.heard(DEST, 0, 3, now=100.0)
    assert breaker.admit(DEST, 100.0) is None
    breaker.heard(DEST, 2, 1, now=101.0)
    assert breaker.state(DEST, 101.0) is State.OPEN
    assert breaker.admit(DEST, 101.5) == 5


def test_errors_older_than_the_window_do_not_count() -> None:
    """An error rate is over the window: old errors age out."""
    breaker = Breaker(CONFIG)
    breaker.heard(DEST, 0, 3, now=100.0)
    breaker.heard(DEST, 1, 0, now=115.0)
    assert breaker.state(DEST, 115.0) is State.CLOSED


def test_a_half_open_circuit_lets_one_probe_through_and_closes_on_its_success() -> None:
    """After the open time one attempt runs, the others wait; its success closes the circuit
    and is shared with the fleet."""
    breaker = Breaker(CONFIG)
    breaker.heard(DEST, 0, 4, now=100.0)
    assert breaker.admit(DEST, 105.0) is None
    assert breaker.admit(DEST, 105.1) == 5
    breaker.ended(DEST, ok=True, now=105.2)
    assert breaker.state(DEST, 105.2) is State.CLOSED
    assert breaker.report(105.2) == ({DEST: [1, 0]}, [DEST], {})


def test_a_failed_probe_opens_the_circuit_again() -> None:
    """A probe that fails starts another open period."""
    breaker = Breaker(CONFIG)
    breaker.heard(DEST, 0, 4, now=100.0)
    assert breaker.admit(DEST, 105.0) is None
    breaker.ended(DEST, ok=False, now=105.5)
    assert breaker.state(DEST, 106.0) is State.OPEN


@pytest.mark.parametrize(
    "body",
    [
        b"nonsense",
        b"[]",
        b'{"counts": {"d": [1]}}',
        b'{"counts": {"d": [-1, 2]}}',
        b'{"closed": 3}',
    ],
)
def test_a_malformed_report_is_ignored(body: bytes) -> None:
    """Whatever reaches the fanout cannot break a worker or open a circuit."""
    assert read_report(body) == Report()


@pytest.mark.long
@pytest.mark.broker
async def test_a_failing_endpoint_opens_the_circuit_and_deferred_tasks_run_when_it_recovers(
    broker: TestBroker, run_worker: Any
) -> None:
    """Four 503s open the host's circuit; new tasks are deferred without reaching the endpoint or
    spending an attempt, one whose deadline comes first ends ``expired``; once the endpoint
    recovers a probe closes the circuit and the deferred tasks run as their attempt 1."""
    with serve(Endpoint(statuses=[503])) as endpoint, capture_logs() as logs:
        # Open long enough that no half-open probe comes before the check below: on a loaded
        # machine the deferrals it waits for took 7 s, and a probe would meet the 503 again.
        worker = await run_worker(**{**QUICK, "breaker_open_seconds": 15, "flow_scope": "host"})
        for _ in range(4):
            await publish(broker, envelope("http", {"url": endpoint.url}), plan(60_000))
        await eventually(lambda: bool(worker._flow.states()), timeout=10)
        late = envelope("http", {"url": endpoint.url}, deadline=utcnow() + timedelta(seconds=1))
        await publish(broker, late, plan(60_000))
        runs = [envelope("http", {"url": f"{endpoint.url}/r{n}"}) for n in range(3)]
        for env in runs:
            await publish(broker, env, plan(60_000))
        await eventually(lambda: len(deferred(logs)) >= 3, timeout=10)
        assert len(endpoint.requests) == 4
        endpoint.statuses = [200]
        await eventually(lambda: len(endpoint.requests) >= 7, timeout=40)
    [record] = await broker.get_all(broker.names.failed_queue)
    assert (record.headers["cron-reason"], record.headers["cron-run-id"]) == (
        "expired",
        late.run_id,
    )
    later = [headers for path, headers, _ in endpoint.requests if path.startswith("/r")]
    assert [h["X-Cron-Attempt"] for h in later] == ["1", "1", "1"]
    assert {e["reason"] for e in deferred(logs)} == {"circuit-open"}


@pytest.mark.broker
async def test_errors_seen_by_one_worker_open_the_circuit_on_every_worker(
    broker: TestBroker, run_worker: Any
) -> None:
    """The error rate is the fleet's: both workers open the circuit, whichever ran the tasks."""
    with serve(Endpoint(statuses=[503])) as endpoint:
        workers = [await run_worker(**QUICK), await run_worker(**QUICK)]
        for _ in range(4):
            await publish(broker, envelope("http", {"url": endpoint.url}), plan(60_000))
        await eventually(lambda: all(w._flow.states() for w in workers), timeout=10)
    key = destination(endpoint.url, "endpoint")
    assert all(w._flow.states() == {key: State.OPEN} for w in workers)


@pytest.mark.broker
@pytest.mark.parametrize("scope", ["endpoint", "host"])
async def test_a_path_that_always_fails_defers_a_healthy_path_of_its_host_only_by_host(
    broker: TestBroker, run_worker: Any, scope: str
) -> None:
    """Four 503s from ``/broken`` open its circuit; a task to ``/healthy`` on the same server
    still runs when keyed by endpoint (the default), and is deferred when keyed by host. The
    deferral says what opened the circuit: the failures' count and causes."""
    broken = Endpoint(statuses=[200], by_path={"/broken": [503]})
    with serve(broken) as endpoint, capture_logs() as logs:
        worker = await run_worker(**{**QUICK, "breaker_open_seconds": 30, "flow_scope": scope})
        for _ in range(4):
            await publish(broker, envelope("http", {"url": f"{endpoint.url}/broken"}), plan(60_000))
        await eventually(lambda: bool(worker._flow.states()), timeout=10)
        broke, healthy = (envelope("http", {"url": f"{endpoint.url}/{p}"}) for p in PATHS)
        for env in (broke, healthy):
            await publish(broker, env, plan(60_000))
        await eventually(lambda: {broke.run_id, healthy.run_id} <= attempted(logs), timeout=10)
    outcomes = {e["run_id"]: e for e in logs if e["event"] == "attempt"}
    assert outcomes[broke.run_id]["outcome"] == "deferred"
    assert len(endpoint.paths("/broken")) == 4
    if scope == "endpoint":
        assert outcomes[healthy.run_id]["outcome"] == "succeeded"
        assert worker._flow.states() == {f"{endpoint.url}/broken": State.OPEN}
        cause = "HTTP 503 x4"
    else:
        assert outcomes[healthy.run_id]["outcome"] == "deferred"
        assert endpoint.paths("/healthy") == []
        cause = "HTTP 503 /broken x4"
    said = f"(opened by 4 of 4 attempts failing over 30 s, {cause})"
    assert said in outcomes[broke.run_id]["error"]


PATHS = ("broken", "healthy")


def attempted(logs: Sequence[Mapping[str, Any]]) -> set[str]:
    """The run ids of the attempt lines logged so far."""
    return {e["run_id"] for e in logs if e["event"] == "attempt"}


def deferred(logs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The attempt log lines of deferred attempts."""
    return [e for e in logs if e["event"] == "attempt" and e.get("outcome") == "deferred"]


@pytest.mark.broker
@pytest.mark.faults
@pytest.mark.parametrize("node", ["private"])
async def test_the_fleet_shares_its_counts_again_after_a_broker_restart(
    broker: TestBroker, private_broker: PrivateBroker, run_worker: Any
) -> None:
    """The node restarts under two workers; each listens again on a new queue, and the errors
    one of them sees still open the circuit on both."""
    settings = broker.settings()
    broker.plan_keys.update(step.key for step in settings.default_plan().suffixes())
    with serve(Endpoint(statuses=[503])) as endpoint:
        workers = [await run_worker(**QUICK), await run_worker(**QUICK)]
        await asyncio.to_thread(private_broker.sync_metadata)
        await asyncio.to_thread(private_broker.restart)
        async with Client(settings) as client:

            async def one_more_failing_then_all_open() -> bool:
                await client.enqueue("http", {"url": endpoint.url})
                return all(w._flow.states() for w in workers)

            await eventually(one_more_failing_then_all_open, timeout=60, interval=0.5)
    key = destination(endpoint.url, "endpoint")
    assert all(w._flow.states() == {key: State.OPEN} for w in workers)
