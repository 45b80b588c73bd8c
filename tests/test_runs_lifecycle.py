"""A run's state folded from its events, and what a handler may return, without a broker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from warren_cron.history.events import Event
from warren_cron.history.lifecycle import status_of
from warren_cron.history.run_fold import fold_runs
from warren_cron.history.timeline import steps
from warren_cron.monitor.console.long_runs import LongRunsSeen
from warren_cron.worker.attempt import Outcome, returned_result

NOW = datetime(2026, 5, 1, 12, tzinfo=UTC)


def events(*items: tuple[str, dict[str, Any]]) -> list[Event]:
    """Events of run ``r`` a second apart, in the order given."""
    return [
        Event(kind, NOW + timedelta(seconds=i), i, "r", None, {"type": kind, **data})
        for i, (kind, data) in enumerate(items)
    ]


def state(*items: tuple[str, dict[str, Any]]) -> str:
    """The state the events leave run ``r`` in."""
    return status_of("r", fold_runs(events(*items)).get("r"), NOW).state


def test_a_run_ending_on_its_deadline_is_expired_not_failed() -> None:
    """An attempt refused for its passed deadline ends the run ``expired``."""
    end = {"attempt": 1, "outcome": "failed", "reason": "expired", "error": "not run"}
    assert state(("attempt", end), ("failed", {"attempts": 1, "reason": "expired"})) == "expired"


def test_a_run_replaced_or_skipped_by_its_schedule_is_cancelled() -> None:
    """Overlap policies and scheduler skips end a run ``cancelled``, with the reason kept."""
    replaced = {"attempt": 1, "outcome": "replaced", "reason": "replaced"}
    assert state(("started", {"attempt": 1}), ("attempt", replaced)) == "cancelled"
    assert state(("skipped", {"reason": "paused"})) == "cancelled"


def test_a_fired_run_due_later_is_delayed_and_one_without_events_pending() -> None:
    """A fire for a later time is delayed; a run id with no event is pending."""
    later = (NOW + timedelta(hours=1)).isoformat()
    assert state(("fired", {"scheduled_for": later})) == "delayed"
    assert status_of("once:job@2026-05-01T11:00:00Z-ab", None, NOW).state == "pending"


def test_a_value_that_is_not_json_fails_the_attempt_for_good() -> None:
    """A set is no JSON: the attempt ends terminal with reason bad-result, naming the fix."""
    result = returned_result({1, 2}, 1024)
    assert (result.outcome, result.reason) == (Outcome.TERMINAL, "bad-result")
    assert result.error is not None and "return JSON data" in result.error


def test_a_value_at_the_bound_passes_and_one_byte_over_fails() -> None:
    """The bound counts the JSON's bytes: 16 passes at 16, fails at 15."""
    assert returned_result("x" * 14, 16).outcome is Outcome.SUCCEEDED
    assert returned_result("x" * 14, 15).reason == "result-too-large"


def test_a_run_held_back_by_flow_control_is_delayed_not_succeeded() -> None:
    """A deferred attempt (no attempt spent) leaves the run waiting for its next try."""
    deferred = {"attempt": 1, "outcome": "deferred", "reason": "rate-limited"}
    assert state(("fired", {}), ("attempt", deferred)) == "delayed"


def test_a_long_attempt_beating_and_handed_over_stays_running_with_its_last_progress() -> None:
    """Progress summaries keep a run running; an attempt that lost its claim or found the
    claim held ends nothing: the attempt is shown on the worker that took it over."""
    lost = {"attempt": 1, "outcome": "replaced", "reason": "claim-lost", "error": "lost"}
    held = {"attempt": 1, "outcome": "lock-contended", "reason": "claimed-elsewhere"}
    run = fold_runs(
        events(
            ("started", {"attempt": 1, "host": "a", "pid": 1}),
            ("progress", {"attempt": 1, "progress": {"done": 1}, "heartbeats": 4}),
            ("attempt", lost),
            ("attempt", held),
            ("started", {"attempt": 1, "host": "b", "pid": 2}),
            ("progress", {"attempt": 1, "progress": {"done": 2}, "heartbeats": 1}),
        )
    )["r"]
    status = status_of("r", run, NOW)
    assert (status.state, status.progress, status.heartbeats, status.error) == (
        "running",
        {"done": 2},
        1,
        None,
    )
    assert status.last_heartbeat == NOW + timedelta(seconds=5)
    assert [(a.number, a.worker, a.outcome) for a in status.attempts] == [(1, "b:2", None)]
    assert state(("started", {"attempt": 1}), ("attempt", lost)) == "running"


def test_the_timeline_keeps_the_last_progress_of_each_attempt() -> None:
    """Hours of summaries make one step per attempt: its latest."""
    beats = [("progress", {"attempt": 1, "progress": n, "heartbeats": n}) for n in range(50)]
    run = fold_runs(events(("started", {"attempt": 1}), *beats))["r"]
    [step] = steps(run)  # the started mark is told by the attempt's own event
    assert (step.label, step.detail) == ("progress", "49 (49 heartbeats)")


def test_the_overview_lists_a_long_run_until_its_attempt_ends_not_through_a_hand_over() -> None:
    """A progress event enters a run, a hand-over keeps it, its attempt's end removes it."""
    seen = LongRunsSeen()
    beat = ("progress", {"attempt": 1, "progress": 1, "heartbeats": 1})
    seen.on_events(events(beat, ("attempt", {"attempt": 1, "reason": "claim-lost"})), 0)
    assert [run.run_id for run in seen.now(NOW)] == ["r"]
    assert seen.now(NOW + timedelta(days=2)) == []  # unheard for a day: forgotten
    seen.on_events(events(beat, ("attempt", {"attempt": 1, "outcome": "succeeded"})), 0)
    assert seen.running == {}
