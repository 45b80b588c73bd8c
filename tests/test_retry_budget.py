"""The retry budget per http destination: retries at most a share of first attempts."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import plan
from tests.helpers import envelope, publish
from tests.namespace import TestBroker
from tests.webhook import Endpoint, serve
from warren_cron.faultkit.waits import eventually
from warren_cron.worker.budget import RetryBudget
from warren_cron.worker.fleet import read_report

DEST = "http://api.example:80"


def test_retries_are_granted_up_to_the_share_of_first_attempts() -> None:
    """Ten first attempts at 20 % allow two retries; the third is refused."""
    budget = RetryBudget(ratio=0.2, min_retries=0, window_seconds=60)
    for _ in range(10):
        budget.first(DEST)
    assert [budget.grant(DEST, 0.0) for _ in range(3)] == [True, True, False]


def test_a_quiet_destination_keeps_its_minimum_retries() -> None:
    """With no first attempts counted, the minimum still allows retries."""
    budget = RetryBudget(ratio=0.2, min_retries=2, window_seconds=60)
    assert [budget.grant(DEST, 0.0) for _ in range(3)] == [True, True, False]


def test_the_fleets_counts_spend_the_budget_and_age_out() -> None:
    """Retries other workers reported count; once out of the window they no longer do."""
    budget = RetryBudget(ratio=0.2, min_retries=0, window_seconds=60)
    budget.heard(DEST, 10, 2, now=100.0)
    assert not budget.grant(DEST, 100.0)
    budget.heard(DEST, 10, 0, now=170.0)
    assert budget.grant(DEST, 170.0)


def test_a_report_carries_the_budgets_counts() -> None:
    """Budget counts ride in the same report as the breaker's; malformed ones are dropped."""
    report = read_report(b'{"budget": {"a": [5, 1], "b": [1, "x"]}, "breaker": {"a": [1, 0]}}')
    assert (report.budget, report.breaker) == ({"a": (5, 1)}, {"a": (1, 0)})


@pytest.mark.broker
async def test_a_spent_budget_sends_failures_to_the_failed_queue_with_that_reason(
    broker: TestBroker, run_worker: Any
) -> None:
    """Two tasks to a failing endpoint at 50 % and no minimum get one retry between them; the
    other failures go to the failed queue as ``retry-budget-exhausted`` (not 6 requests)."""
    with serve(Endpoint(statuses=[503])) as endpoint:
        await run_worker(
            retry_budget_enabled=True, retry_budget_ratio=0.5, retry_budget_min_retries=0
        )
        for _ in range(2):
            await publish(broker, envelope("http", {"url": endpoint.url}), plan(50, 50))
        await broker.wait_depth(broker.names.failed_queue, 2)
    records = await broker.get_all(broker.names.failed_queue)
    reasons = sorted(r.headers["cron-reason"] for r in records)
    assert reasons == ["retry-budget-exhausted", "retry-budget-exhausted"]
    assert len(endpoint.requests) == 3


@pytest.mark.broker
@pytest.mark.parametrize("scope", ["endpoint", "host"])
async def test_a_path_that_always_fails_spends_the_budget_of_its_host_only_by_host(
    broker: TestBroker, run_worker: Any, scope: str
) -> None:
    """``/broken`` spends its budget (two tasks, one retry at 25 %); a task to ``/flaky`` on
    the same server that fails once is then retried when keyed by endpoint (the default), and
    refused its retry when keyed by host."""
    served = Endpoint(by_path={"/broken": [503], "/flaky": [503, 200]})
    with serve(served) as endpoint:
        await run_worker(
            retry_budget_enabled=True,
            retry_budget_ratio=0.25,
            retry_budget_min_retries=0,
            flow_scope=scope,
        )
        for _ in range(2):
            await publish(broker, envelope("http", {"url": f"{endpoint.url}/broken"}), plan(50, 50))
        await broker.wait_depth(broker.names.failed_queue, 2)
        await publish(broker, envelope("http", {"url": f"{endpoint.url}/flaky"}), plan(50, 50))
        if scope == "endpoint":
            await eventually(lambda: len(endpoint.paths("/flaky")) == 2)
            assert await broker.depth(broker.names.failed_queue) == 2
        else:
            await broker.wait_depth(broker.names.failed_queue, 3)
            assert len(endpoint.paths("/flaky")) == 1
    assert len(endpoint.paths("/broken")) == 3
    records = await broker.get_all(broker.names.failed_queue)
    assert {r.headers["cron-reason"] for r in records} == {"retry-budget-exhausted"}
