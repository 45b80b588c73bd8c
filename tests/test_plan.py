"""Retry plans: routing keys, exponential delays, caps and timelines."""

from __future__ import annotations

import pytest

from warren_cron.errors import PlanError
from warren_cron.plan import RetryPlan, format_delay, parse_delay


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0ms"),
        (1, "1ms"),
        (500, "500ms"),
        (1500, "1500ms"),
        (30_000, "30s"),
        (90_000, "90s"),
        (60_000, "1m"),
        (120_000, "2m"),
        (3_600_000, "1h"),
        (5_400_000, "90m"),
    ],
)
def test_delays_are_spelled_in_the_largest_exact_unit_and_read_back(ms: int, text: str) -> None:
    """Each delay has one spelling, and the spelling reads back to the same milliseconds."""
    assert format_delay(ms) == text
    assert parse_delay(text) == ms


def test_default_plan_doubles_from_thirty_seconds() -> None:
    """Three retries of 30 s doubling give the key 30s-1m-2m."""
    plan = RetryPlan.exponential(3, 30_000, 2.0)
    assert plan.delays_ms == (30_000, 60_000, 120_000)
    assert plan.key == "30s-1m-2m"


def test_each_retry_drops_the_first_step_until_final() -> None:
    """The key after each retry is the rest of the plan, and the last attempt is final."""
    keys = [step.key for step in RetryPlan.exponential(3, 500, 2.0).suffixes()]
    assert keys == ["500ms-1s-2s", "1s-2s", "2s"]
    assert RetryPlan((2000,)).rest().key == "final"


def test_max_delay_caps_every_step() -> None:
    """CRON_RETRY_MAX_DELAY_MS caps each retry delay."""
    assert RetryPlan.exponential(5, 1000, 3.0, 10_000).delays_ms == (
        1000,
        3000,
        9000,
        10_000,
        10_000,
    )


def test_zero_retries_is_final_at_once() -> None:
    """With no retries, the first attempt is already the last."""
    plan = RetryPlan.exponential(0, 1000, 2.0)
    assert plan.spent and plan.key == "final"
    assert list(plan.suffixes()) == []


def test_key_round_trips() -> None:
    """A routing key reads back into the same plan."""
    plan = RetryPlan.exponential(4, 200, 1.5)
    assert RetryPlan.from_key(plan.key) == plan
    assert RetryPlan.from_key("final").spent


@pytest.mark.parametrize("key", ["", "abc", "5x", "1s--2s", "-1s", "1.5s"])
def test_keys_that_are_no_plan_are_rejected(key: str) -> None:
    """Anything but delays joined by dashes is a PlanError naming the bad step."""
    with pytest.raises(PlanError, match="is not a delay"):
        RetryPlan.from_key(key)


def test_timeline_adds_up_the_delays() -> None:
    """Attempt start times: 0, 0.2, 0.6, 1.4 s for 200 ms doubling three times."""
    assert RetryPlan.exponential(3, 200, 2.0).timeline_ms() == [0, 200, 600, 1400]
