"""Runs folded from history events, whatever order the writers' batches reached the stream in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from warren_cron.history.events import Event
from warren_cron.history.recent import FIRST_WINDOW, windows
from warren_cron.history.runs import Run, fold_runs, run_time

T0 = datetime(2026, 1, 31, 2, 30, tzinfo=UTC)
RUN = "nightly@2026-01-31T02:30:00Z"


def ev(kind: str, second: float, **data: Any) -> Event:
    """An event of the run ``RUN``, ``second`` seconds after its fire."""
    return Event(kind, T0 + timedelta(seconds=second), 0, RUN, "nightly", {"type": kind, **data})


def attempt(second: float, number: int, outcome: str, replay: int = 0, error: str = "") -> Event:
    """An attempt event, with an error when one is given."""
    extra = {"replay": replay} if replay else {}
    return ev("attempt", second, attempt=number, outcome=outcome, error=error or None, **extra)


FAILED_TWICE = [
    attempt(1, 1, "retrying", error="boom 1"),
    attempt(2, 2, "failed", error="boom 2"),
    ev("failed", 2, reason="retries-exhausted", attempts=2, error="boom 2"),
]
REPLAYED = ev("replayed", 60, by="ops@host", plan="30s", replay=1)


def fold(events: list[Event]) -> Run:
    """The one run the events tell of."""
    return fold_runs(events)[RUN]


def test_a_replay_then_its_success_ends_the_run_succeeded() -> None:
    """Attempts count on across the replay; the last error is the one before it."""
    run = fold([*FAILED_TWICE, REPLAYED, attempt(61, 1, "succeeded", replay=1)])
    assert (run.outcome, run.attempts, run.replays) == ("succeeded", 3, 1)
    assert run.last_error == "boom 2"
    assert run.seconds == 61


def test_the_replays_attempt_reaching_the_stream_first_still_ends_the_run() -> None:
    """The worker's event before the replay script's: the run is not taken back to running."""
    run = fold([*FAILED_TWICE, attempt(61, 1, "succeeded", replay=1), REPLAYED])
    assert (run.outcome, run.attempts, run.replays) == ("succeeded", 3, 1)


def test_a_late_failure_of_before_the_replay_does_not_end_the_replayed_run() -> None:
    """The first failure's events after the replay's: still running, counted, error kept."""
    run = fold([FAILED_TWICE[0], REPLAYED, *FAILED_TWICE[1:]])
    assert (run.outcome, run.attempts, run.last_error) == ("running", 2, "boom 2")
    later = fold([FAILED_TWICE[0], REPLAYED, attempt(61, 1, "retrying", 1, "new"), *FAILED_TWICE])
    assert (later.outcome, later.attempts, later.last_error) == ("retrying", 3, "new")


def test_story_lists_events_in_time_order_each_attempt_with_an_error_key() -> None:
    """``show --json``: by time, whatever the stream's order; a success's error is null."""
    run = fold([*FAILED_TWICE, attempt(61, 1, "succeeded", replay=1), REPLAYED])
    events = run.story()["events"]
    assert [e["type"] for e in events] == ["attempt", "attempt", "failed", "replayed", "attempt"]
    assert events[-1]["error"] is None


@pytest.mark.parametrize(
    ("run_id", "named"),
    [
        ("nightly@2026-01-31T02:30:00Z", T0),
        ("nightly@manual-2026-01-31T02:30:00.5Z", T0 + timedelta(seconds=0.5)),
        ("once:job@2026-01-31T02:30:00.250000Z-0a1b2c3d", T0 + timedelta(seconds=0.25)),
        ("a-run-id-of-some-other-client", None),
        ("nightly@2026-13-45T02:30:00Z", None),
    ],
)
def test_the_time_a_run_id_names(run_id: str, named: datetime | None) -> None:
    """Scheduled, manual and one-off run ids name a time; others none."""
    assert run_time(run_id) == named


def test_windows_grow_fourfold_and_end_at_since() -> None:
    """5 minutes, 20, 80, 320, then the rest of a day."""
    since = T0 - timedelta(days=1)
    starts = [T0 - start for start in windows(since, T0)]
    assert starts == [FIRST_WINDOW * 4**n for n in range(5)] + [timedelta(days=1)]
    assert windows(T0 - timedelta(minutes=1), T0) == [T0 - timedelta(minutes=1)]
