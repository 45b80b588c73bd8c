"""``Retry-After`` on a 429 or 503 sets when the next attempt runs, up to the retry cap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import plan
from tests.helpers import envelope, publish
from tests.namespace import TestBroker
from tests.webhook import Endpoint, serve
from warren_cron.clock import utcnow
from warren_cron.faultkit.waits import eventually
from warren_cron.headers import H_SPENT, attempt_number
from warren_cron.worker.attempt import Outcome, Result
from warren_cron.worker.fate import Action, decide
from warren_cron.worker.retry_after import retry_after, retry_after_hold

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("3", 3.0),
        (" 120 ", 120.0),
        ("Thu, 26 Nov 2026 12:00:30 GMT", 30.0),
        ("Thu, 26 Nov 2026 11:00:00 GMT", 0.0),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        ("9" * 100, None),
        (None, None),
    ],
)
def test_retry_after_reads_seconds_or_a_date_and_ignores_garbage(
    value: str | None, seconds: float | None
) -> None:
    """Whole seconds and HTTP dates are read; anything else is as if no header came."""
    assert retry_after(value, NOW) == seconds


def test_a_retry_after_of_ten_years_is_capped_at_the_max_delay_or_the_plans_longest_step() -> None:
    """An endpoint cannot park a task past CRON_RETRY_MAX_DELAY_MS (an hour when unset), or
    past what its own retry plan would wait when that is longer."""
    ten_years = 10 * 365 * 86400
    assert retry_after_hold(ten_years, "30s-1m-2m", 60_000) == 120
    assert retry_after_hold(ten_years, "30s-1m-2m", 600_000) == 600
    assert retry_after_hold(ten_years, "30s-1m-2m") == 3600
    assert retry_after_hold(ten_years, "2h", None) == 7200
    assert retry_after_hold(2.2, "30s-1m") == 3


def test_a_retry_after_longer_than_every_step_left_is_honoured() -> None:
    """A 429 asking 3 s on a plan of 200 ms steps waits the 3 s, not the step's size."""
    assert retry_after_hold(3, "200ms-200ms") == 3
    assert retry_after_hold(3, "200ms-200ms", 2_000) == 2
    result = Result(Outcome.RETRYABLE, "http-status", "HTTP 429", 429, retry_after=3)
    assert decide(result, "200ms-200ms").hold == 3


def test_a_retry_after_sets_the_verdicts_hold_and_spends_the_step() -> None:
    """The next attempt waits what the endpoint asked, through the delay levels."""
    result = Result(Outcome.RETRYABLE, "http-status", "HTTP 429", 429, retry_after=3)
    verdict = decide(result, "30s-1m")
    assert (verdict.action, verdict.hold) == (Action.RETRY, 3)
    assert decide(Result(Outcome.RETRYABLE, "x", "y"), "30s-1m").hold is None


def test_a_retry_after_past_the_deadline_ends_the_task_expired() -> None:
    """A wait that would start the next attempt after the deadline fails it at once."""
    result = Result(Outcome.RETRYABLE, "http-status", "HTTP 503", 503, retry_after=600)
    verdict = decide(result, "1h-1h", utcnow() + timedelta(seconds=60))
    assert (verdict.action, verdict.reason) == (Action.FAIL, "expired")


def test_spent_attempts_of_a_copy_count_toward_the_attempt_number() -> None:
    """A task published again by the worker keeps counting its attempts."""
    assert attempt_number({H_SPENT: 2}, "q") == 3
    assert attempt_number({H_SPENT: "junk"}, "q") == 1


@pytest.mark.broker
async def test_retry_after_3_delays_the_retry_by_3_seconds(
    broker: TestBroker, run_worker: Any
) -> None:
    """A 429 with ``Retry-After: 3`` is retried 3 s later (not after the plan's 1 min), and
    the retry is attempt 2 of the same run."""
    with serve(Endpoint(statuses=[429, 200], retry_after="3")) as endpoint:
        await run_worker()
        env = envelope("http", {"url": f"{endpoint.url}/hook"})
        await publish(broker, env, plan(60_000, 60_000))
        await eventually(lambda: len(endpoint.requests) >= 2, timeout=15)
    waited = endpoint.times[1] - endpoint.times[0]
    # Far below the plan's 60 s: on a loaded machine the hops through the delay levels add
    # seconds (5.5 s seen in CI).
    assert 2.9 <= waited < 10
    assert [h["X-Cron-Attempt"] for _, h, _ in endpoint.requests] == ["1", "2"]
    assert await broker.depth(broker.names.failed_queue) == 0


@pytest.mark.broker
async def test_a_429_asking_3_s_on_a_plan_of_200_ms_steps_waits_the_3_s(
    broker: TestBroker, run_worker: Any
) -> None:
    """The endpoint's wait is honoured past the plan's steps (up to CRON_RETRY_MAX_DELAY_MS):
    the retry comes no sooner than 3 s later, as attempt 2, and the task is not dropped."""
    with serve(Endpoint(statuses=[429, 200], retry_after="3")) as endpoint:
        await run_worker()
        await publish(broker, envelope("http", {"url": endpoint.url}), plan(200, 200))
        # Bounded by far more than the 3 s: the delay levels' hops are slow on a loaded machine.
        await eventually(lambda: len(endpoint.requests) >= 2, timeout=60)
    assert endpoint.times[1] - endpoint.times[0] >= 3
    assert [h["X-Cron-Attempt"] for _, h, _ in endpoint.requests] == ["1", "2"]
    assert await broker.depth(broker.names.failed_queue) == 0


@pytest.mark.broker
async def test_a_retry_after_of_ten_years_waits_no_longer_than_the_max_delay(
    broker: TestBroker, run_worker: Any
) -> None:
    """A hostile ``Retry-After`` is capped by CRON_RETRY_MAX_DELAY_MS (here 1 s, the plan's
    steps too)."""
    ten_years = str(10 * 365 * 86400)
    with serve(Endpoint(statuses=[503, 503, 200], retry_after=ten_years)) as endpoint:
        await run_worker(retry_max_delay_ms=1000)
        await publish(broker, envelope("http", {"url": endpoint.url}), plan(1000, 1000))
        await eventually(lambda: len(endpoint.requests) >= 3, timeout=15)
    assert [h["X-Cron-Attempt"] for _, h, _ in endpoint.requests] == ["1", "2", "3"]


@pytest.mark.broker
async def test_a_garbage_retry_after_follows_the_plan_and_the_last_failure_is_recorded(
    broker: TestBroker, run_worker: Any
) -> None:
    """Garbage is ignored: the plan's retries run, then the task fails with its attempts."""
    with serve(Endpoint(statuses=[503], retry_after="soon-ish")) as endpoint:
        await run_worker()
        await publish(broker, envelope("http", {"url": endpoint.url}), plan(50))
        await broker.wait_depth(broker.names.failed_queue, 1)
    [record] = await broker.get_all(broker.names.failed_queue)
    assert len(endpoint.requests) == 2
    assert record.headers["cron-reason"] == "retries-exhausted"
