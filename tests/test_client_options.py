"""What an enqueue asks for, checked before anything is sent (no broker)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from warren_cron.client import EnqueueError, EnqueueOptions, PlanError, RetryPlan
from warren_cron.client.options import one_off, plan_of

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)


def test_at_and_delay_set_when_the_task_is_due() -> None:
    """``delay`` counts from now; ``at`` is kept; a time in the past means now."""
    assert one_off("noop", None, {"delay": 90}, NOW).scheduled_for == NOW + timedelta(seconds=90)
    later = NOW + timedelta(days=3)
    assert one_off("noop", None, {"at": later}, NOW).scheduled_for == later
    assert one_off("noop", None, {"at": NOW - timedelta(hours=1)}, NOW).scheduled_for == NOW


def test_ttl_and_deadline_set_the_deadline() -> None:
    """``ttl`` counts from now, as the hosted schedulers' one-off jobs do."""
    options: EnqueueOptions = {"delay": timedelta(minutes=1), "ttl": timedelta(hours=1)}
    assert one_off("noop", None, options, NOW).deadline == NOW + timedelta(hours=1)
    assert one_off("noop", None, {"deadline": NOW}, NOW).deadline == NOW


def test_the_same_key_gives_the_same_run_id() -> None:
    """An idempotency key makes the run id; without one each enqueue gets a fresh id."""
    first = one_off("noop", None, {"key": "order-7"}, NOW)
    again = one_off("noop", {"other": 1}, {"key": "order-7"}, NOW + timedelta(seconds=5))
    assert first.run_id == again.run_id == "key:order-7"
    assert one_off("noop", None, {}, NOW).run_id != one_off("noop", None, {}, NOW).run_id


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"at": datetime(2030, 1, 1)}, "at must be timezone-aware"),
        ({"at": NOW, "delay": 1}, "at or delay, not both"),
        ({"delay": -1}, "delay must not be negative"),
        ({"delay": 2**28}, "beyond the longest delay"),
        ({"ttl": 1, "deadline": NOW}, "ttl or deadline, not both"),
        ({"delay": 60, "ttl": 30}, "expire at .* before it is due"),
        ({"deadline": datetime(2030, 1, 1)}, "deadline must be timezone-aware"),
        ({"key": ""}, "key must be 1 to 200"),
        ({"timeout": 0}, "timeout_seconds"),
    ],
)
def test_bad_options_are_refused_naming_the_argument(options: Any, why: str) -> None:
    """Each mistake is an EnqueueError that names the argument at fault."""
    with pytest.raises(EnqueueError, match=why):
        one_off("noop", None, options, NOW)


def test_an_empty_task_name_is_refused() -> None:
    """The task name is checked as the worker will read it."""
    with pytest.raises(EnqueueError, match="task"):
        one_off("", None, {}, NOW)


def test_a_plan_may_be_given_by_its_key() -> None:
    """``plan="30s-1m"`` is the plan of that key; a bad key is a PlanError."""
    default = RetryPlan((1000,))
    assert plan_of({"plan": "30s-1m"}, default) == RetryPlan((30_000, 60_000))
    assert plan_of({}, default) is default
    with pytest.raises(PlanError, match="retry step"):
        plan_of({"plan": "soon"}, default)
