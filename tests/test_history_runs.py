"""Runs folded from history events, whatever order the writers' batches reached the stream in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from warren_cron.history.events import Event
from warren_cron.history.recent import FIRST_WINDOW, windows
from warren_cron.history.run_fold import Run, fold_runs, run_time

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


def test_story_lists_events_in_order_each_attempt_with_an_error_key() -> None:
    """``show --json``: in the order they happened, whatever the stream's order; a success's
    error is null."""
    run = fold([*FAILED_TWICE, attempt(61, 1, "succeeded", replay=1), REPLAYED])
    events = run.story()["events"]
    assert [e["type"] for e in events] == ["attempt", "attempt", "failed", "replayed", "attempt"]
    assert events[-1]["error"] is None


def at_ms(kind: str, ms: int, offset: int, **data: Any) -> Event:
    """An event of ``RUN`` at ``ms`` milliseconds after its fire, held at stream ``offset``."""
    moment = T0 + timedelta(milliseconds=ms)
    return Event(kind, moment, offset, RUN, "nightly", {"type": kind, **data})


def label(event: Event) -> str:
    """``fired``, ``attempt 2``, ``attempt 1 of replay 1``: what ``history.py show`` says."""
    text = f"{event.type} {event.get('attempt')}" if event.type == "attempt" else event.type
    text += f" of replay {event.get('replay')}" if event.get("replay") else ""
    return text + (f" on {event.get('host')}" if event.get("host") else "")


FIRE = at_ms("fired", 0, 5)
ONE, TWO = at_ms("attempt", 0, 2, attempt=1), at_ms("attempt", 900, 3, attempt=2)
GAVE_UP = at_ms("failed", 900, 1, attempts=2)
REPLAY = at_ms("replayed", 5000, 9, replay=1)
AGAIN = at_ms("attempt", 4990, 8, attempt=1, replay=1)  # the replay script's clock is ahead
AGAIN_FAILED = at_ms("failed", 4990, 8, attempts=1, replay=1)
ORDERS = [
    pytest.param([ONE, FIRE], ["fired", "attempt 1"], id="fire and attempt in one ms"),
    pytest.param(
        [at_ms("attempt", -3, 0, attempt=1), FIRE], ["fired", "attempt 1"], id="worker clock late"
    ),
    pytest.param([TWO, ONE, FIRE], ["fired", "attempt 1", "attempt 2"], id="attempts reversed"),
    pytest.param(
        [GAVE_UP, TWO, ONE, FIRE],
        ["fired", "attempt 1", "attempt 2", "failed"],
        id="failure before its last attempt",
    ),
    pytest.param(
        [AGAIN, GAVE_UP, REPLAY, TWO, FIRE, ONE],
        [
            "fired",
            "attempt 1",
            "attempt 2",
            "failed",
            "replayed of replay 1",
            "attempt 1 of replay 1",
        ],
        id="replay's attempt timed before the replay",
    ),
    pytest.param(
        [at_ms("purged", 900, 0), AGAIN_FAILED, AGAIN, REPLAY, GAVE_UP, FIRE],
        [
            "fired",
            "failed",
            "replayed of replay 1",
            "attempt 1 of replay 1",
            "failed of replay 1",
            "purged",
        ],
        id="purge timed before the failure it purged",
    ),
    pytest.param(
        [at_ms("attempt", 50, 7, attempt=1, host="w2"), ONE, at_ms("triggered", 0, 4)],
        ["triggered", "attempt 1", "attempt 1 on w2"],
        id="a redelivered attempt after the first by time",
    ),
]


@pytest.mark.parametrize(("stream", "told"), ORDERS)
def test_a_runs_story_follows_what_caused_what_not_the_clock_or_the_stream(
    stream: list[Event], told: list[str]
) -> None:
    """Fire or replay first, attempts by number, the failure after them, a purge last; time
    and stream offset only break ties."""
    run = fold(stream)
    assert [label(e) for e in run.in_order()] == told
    assert fold(stream[::-1]).in_order() == run.in_order()


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


def test_a_deferred_run_is_not_ended_and_its_later_attempt_settles_it() -> None:
    """A deferral (flow control) leaves the run open; the attempt that runs later ends it."""
    deferred = fold([attempt(1, 1, "deferred")])
    assert (deferred.outcome, deferred.ended_at) == ("deferred", None)
    run = fold([attempt(1, 1, "deferred"), attempt(31, 1, "succeeded")])
    assert (run.outcome, run.attempts) == ("succeeded", 1)
