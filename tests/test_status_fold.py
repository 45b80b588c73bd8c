"""The status fold without a broker: what each schedule's row is made of, and its storage."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from warren_cron.history.events import Event, decode, encode, event
from warren_cron.history.status_fold import StatusFold

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
_offsets = itertools.count()


def ev(kind: Any, run: str | None, minute: float, **fields: Any) -> Event:
    """One event as read back from the stream, ``minute`` minutes after T0."""
    schedule = run.split("@")[0] if run and "@" in run else fields.pop("schedule", None)
    body = encode([event(kind, run_id=run, schedule=schedule, at=T0 + _m(minute), **fields)])
    [read] = decode(body, next(_offsets))
    return read


def _m(minutes: float) -> timedelta:
    return timedelta(minutes=minutes)


def fired(run: str, minute: float) -> Event:
    """A fire of ``run`` at ``minute``."""
    return ev("fired", run, minute, scheduled_for=(T0 + _m(minute)).isoformat(), plan="1s")


def attempt(run: str, minute: float, outcome: str, number: int = 1, replay: int = 0) -> Event:
    """An attempt of ``run`` (of its replay ``replay``) ending at ``minute`` with ``outcome``."""
    fields = {"attempt": number, "outcome": outcome, "reason": outcome, "replay": replay or None}
    return ev("attempt", run, minute, **fields)


def failed(run: str, minute: float, replay: int = 0) -> Event:
    """The failure record of ``run`` written at ``minute``."""
    return ev("failed", run, minute, reason="handler-error", attempts=1, replay=replay or None)


def test_each_schedule_keeps_its_last_fire_outcome_success_and_failure() -> None:
    """A success then a failure: both times kept, the outcome is the later run's."""
    fold = StatusFold()
    fold.apply_all(
        [
            fired("a@1", 1),
            attempt("a@1", 1.5, "succeeded"),
            fired("a@2", 2),
            attempt("a@2", 2.5, "failed"),
            ev("failed", "a@2", 2.5, reason="handler-error", attempts=1),
        ]
    )
    state = fold.schedules["a"]
    assert state.last_fire_at == T0 + _m(2)
    assert (state.last_outcome, state.last_success_at) == ("failed", T0 + _m(1.5))
    assert state.last_failure_at == T0 + _m(2.5)
    assert fold.counts() == {"a": (0, 1)}


def test_the_last_outcome_is_that_of_the_run_that_ended_last() -> None:
    """Runs that overlap: the one that ends last decides, whichever fired first; a run
    settled by its overlap policy, or still running, decides nothing."""
    fold = StatusFold()
    fold.apply_all(
        [
            fired("a@1", 1),
            fired("a@2", 2),
            attempt("a@2", 3, "succeeded"),
            attempt("a@1", 4, "failed"),
            fired("a@3", 5),
            attempt("a@3", 5.5, "lock-contended"),
            fired("a@4", 6),
        ]
    )
    state = fold.schedules["a"]
    assert (state.last_outcome, state.last_failure_at) == ("failed", T0 + _m(4))
    assert state.last_fire_at == T0 + _m(6)


def test_runs_retrying_now_are_counted_until_they_end() -> None:
    """Two runs retrying, then one succeeds: one left."""
    fold = StatusFold()
    fold.apply_all([fired("a@1", 1), attempt("a@1", 1, "retrying"), fired("a@2", 2)])
    fold.apply(attempt("a@2", 2, "retrying"))
    assert fold.counts() == {"a": (2, 0)}
    fold.apply(attempt("a@1", 3, "succeeded", number=2))
    assert fold.counts() == {"a": (1, 0)}


def test_a_replayed_or_purged_record_leaves_the_failed_count() -> None:
    """Three failures; one replayed (and retrying again), one purged: one record left."""
    fold = StatusFold()
    for n in (1, 2, 3):
        fold.apply(ev("failed", f"a@{n}", n, reason="retries-exhausted", attempts=4))
    assert fold.counts() == {"a": (0, 3)}
    fold.apply(ev("replayed", "a@1", 4, by="ops@host", plan="1s", replay=1))
    fold.apply(attempt("a@1", 5, "retrying", replay=1))
    fold.apply(ev("purged", "a@2", 6, by="ops@host"))
    assert fold.counts() == {"a": (1, 1)}


def test_the_fold_is_stored_and_read_back_whole() -> None:
    """Open runs, failed runs, times and the offset survive a round trip through JSON."""
    fold = StatusFold()
    fold.apply_all([fired("a@1", 1), attempt("a@1", 1, "retrying"), fired("b@1", 1)])
    fold.apply_all([attempt("b@1", 2, "failed"), ev("failed", "b@1", 2, reason="x", attempts=1)])
    fold.state("b").watched_since = T0
    back = StatusFold.loads(fold.dumps())
    assert (back.offset, back.counts(), back.schedules) == (
        fold.offset,
        fold.counts(),
        fold.schedules,
    )
    back.apply(attempt("a@1", 3, "succeeded", number=2))
    assert back.counts() == {"b": (0, 1)}
    assert back.schedules["a"].last_outcome == "succeeded"


def test_events_of_one_off_tasks_and_pauses_touch_no_schedule() -> None:
    """A task without a schedule and a pause event leave every schedule row as it was."""
    fold = StatusFold()
    fold.apply(ev("attempt", "once-123", 1, outcome="retrying", attempt=1))
    fold.apply(ev("paused", None, 2, schedule="a", by="ops@host", reason="maintenance"))
    assert (fold.schedules, fold.counts()) == ({}, {})


def test_a_replay_whose_attempts_reach_the_stream_before_its_replayed_event() -> None:
    """The worker's events of a replayed run may come before the replay script's: a run that
    failed again stays one record in the failed queue, one that succeeded leaves it."""
    fold = StatusFold()
    fold.apply_all([attempt("a@1", 1, "failed"), failed("a@1", 1)])
    fold.apply_all([attempt("a@2", 1, "failed"), failed("a@2", 1)])
    fold.apply_all([attempt("a@1", 5, "failed", replay=1), failed("a@1", 5, replay=1)])
    fold.apply(attempt("a@2", 6, "succeeded", replay=1))
    for run in ("a@1", "a@2"):
        fold.apply(ev("replayed", run, 4, by="ops@host", plan="1s", replay=1))
    assert fold.counts() == {"a": (0, 1)}
    state = fold.schedules["a"]
    assert (state.last_failure_at, state.last_success_at) == (T0 + _m(5), T0 + _m(6))
    assert state.last_outcome == "succeeded"


def reported(process: str, count: int, minute: float) -> Event:
    """A publisher's report, at ``minute``, of ``count`` events it could not write."""
    at = (T0 + _m(minute)).isoformat()
    return ev("dropped", None, minute, count=count, process=process, since=at, until=at)


def test_reported_losses_add_up_per_process_and_are_stored_with_the_fold() -> None:
    """Reports of dropped events count by process kind, touch no schedule, survive storage;
    a fold stored before losses were reported reads back with none."""
    fold = StatusFold()
    fold.apply_all([reported("worker", 20, 1), fired("a@1", 1), reported("worker", 3, 2)])
    fold.apply(reported("scheduler", 1, 3))
    assert fold.lost == {"worker": 23, "scheduler": 1}
    assert (list(fold.schedules), fold.counts()) == (["a"], {})
    assert StatusFold.loads(fold.dumps()).lost == fold.lost
    older = {key: value for key, value in orjson.loads(fold.dumps()).items() if key != "lost"}
    assert StatusFold.loads(orjson.dumps(older)).lost == {}
