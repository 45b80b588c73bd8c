"""Which outcomes of the cluster tests are expected failures: checked without a cluster."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from tests.faults import cluster
from tests.faults.cluster import stuck_on_3_10
from tests.faults.harness import ClusterScenario
from warren_cron.faultkit.scenario import StillInFlight
from warren_cron.names import Names

NAMES = Names("verdict")
SCENARIO = cast(ClusterScenario, SimpleNamespace(names=NAMES))
STUCK = StillInFlight("still in flight", {NAMES.main_queue: 14})
STUCK_RETRYING = StillInFlight("still in flight", {NAMES.retry_prefix + "5s": 3})


def test_the_suite_fails_an_xfail_marker_that_passes(pytestconfig: pytest.Config) -> None:
    """``xfail_strict``: a test marked as failing that passes is reported as a failure."""
    assert pytestconfig.getini("xfail_strict") is True


def test_tasks_stuck_in_the_main_queue_on_3_10_are_the_one_expected_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On 3.10 that outcome is an expected failure; a pass is a pass."""
    monkeypatch.setattr(cluster, "release", lambda: "3")
    expected = pytest.raises(pytest.xfail.Exception, match="stuck in the main queue")
    with expected, stuck_on_3_10(SCENARIO):
        raise STUCK
    with stuck_on_3_10(SCENARIO):
        pass


def test_a_task_stuck_in_a_retry_queue_on_3_10_is_expected_only_where_a_test_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A test that moves quorum leaders by a freeze accepts a task stuck in a retry queue on
    3.10 as the expected failure; on 4.x it still fails."""
    monkeypatch.setattr(cluster, "release", lambda: "3")
    with (
        pytest.raises(pytest.xfail.Exception, match="stuck in a retry queue"),
        stuck_on_3_10(SCENARIO, retry_queues=True),
    ):
        raise STUCK_RETRYING
    monkeypatch.setattr(cluster, "release", lambda: "4")
    with pytest.raises(StillInFlight), stuck_on_3_10(SCENARIO, retry_queues=True):
        raise STUCK_RETRYING


@pytest.mark.parametrize(
    ("release", "error"),
    [
        ("4", STUCK),
        ("3", STUCK_RETRYING),
        ("3", AssertionError("lost ['run@1']")),
        ("3", TimeoutError()),
    ],
    ids=["stuck on 4.x", "stuck in a retry queue", "a loss", "anything else"],
)
def test_any_other_outcome_still_fails(
    monkeypatch: pytest.MonkeyPatch, release: str, error: BaseException
) -> None:
    """Stuck tasks on 4.x, elsewhere than the main queue, a loss or any other error fail."""
    monkeypatch.setattr(cluster, "release", lambda: release)
    with pytest.raises(type(error)), stuck_on_3_10(SCENARIO):
        raise error
