"""Fold events into runs: what happened to one run id, from its fire to its end.

A run's outcome is ``running`` from its fire (or replay) until an attempt ends it:
``succeeded``, ``failed``, ``retrying`` while its plan goes on, ``deferred`` while flow
control holds it back (no attempt spent), ``lock-contended`` or
``replaced`` when its overlap policy settled it, ``skipped`` when the scheduler did not
publish it, ``cancelled`` from a cancel on (``topology/cancel/``): the worker that gets its
message acks it unrun, or stops its running attempt; an attempt that ended first still
tells how it went.

Attempt numbers start at 1 again after a replay, so a run's ``attempts`` adds up the highest
attempt number of each replay. Attempt, failure and replay events carry the number of the
replay they belong to (``replay``, absent before the first): the worker's attempt event for a
replayed task may reach the stream before the replay script's ``replayed`` event, and an
event of an earlier replay never takes a run back to where it stood then.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from warren_cron.clock import utc_text
from warren_cron.history.events import Event
from warren_cron.history.outcomes import HANDED_OVER
from warren_cron.history.outcomes import OUTCOMES as OUTCOMES
from warren_cron.history.outcomes import RUNNING as RUNNING

#: Outcomes after which nothing more happens to a run unless someone replays it.
ENDED = frozenset(OUTCOMES) - {RUNNING, "retrying", "deferred"}
#: Outcomes after which nothing more happens to a run at all: only a failed run leaves a
#: record to replay or purge.
SETTLED = ENDED - {"failed"}
#: The time in a run id: ``nightly@<time>``, ``nightly@manual-<time>``, ``once:job@<time>-<hex>``.
_RUN_TIME = re.compile(r"@(?:manual-)?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)")
#: The step of its replay each kind of event is: begun, tried, ended, purged.
_PHASES = {"fired": 0, "triggered": 0, "skipped": 0, "replayed": 0, "failed": 2, "purged": 3}
#: Events that say an attempt of the run began.
_ATTEMPTED = frozenset({"started", "attempt", "failed"})
#: Where each attempt outcome leaves the run.
_AFTER_ATTEMPT = {"retrying": "retrying"}


@dataclass
class Run:
    """One run and its events, in the order the stream holds them."""

    run_id: str
    schedule: str | None = None
    task: str | None = None
    scheduled_for: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    attempts: int = 0
    outcome: str = RUNNING
    last_error: str | None = None
    replays: int = 0
    purged: bool = False
    #: A long attempt's last progress (any JSON) and when history last heard it beat.
    progress: Any = None
    last_heartbeat: datetime | None = None
    heartbeats: int = 0
    events: list[Event] = field(default_factory=list)
    #: The highest attempt number seen of each replay (0: before the first).
    tries: dict[int, int] = field(default_factory=dict, repr=False)
    #: Replay and attempt number of ``last_error``: a late event of an earlier one loses.
    error_of: tuple[int, int] = field(default=(0, 0), repr=False)

    def apply(self, event: Event) -> None:
        """Take one event of this run into account."""
        self.events.append(event)
        self.schedule = self.schedule or event.schedule
        self.task = self.task or event.get("task")
        self.started_at = self.started_at or event.at
        _APPLY.get(event.type, _ignore)(self, event)

    @property
    def begun_at(self) -> datetime | None:
        """When the run began: its scheduled time, else the time in its run id, else its first
        event."""
        return self.scheduled_for or run_time(self.run_id) or self.started_at

    @property
    def never_began(self) -> bool:
        """True for a run cancelled before any attempt of it began (waiting for its time, or
        for a worker): it has no start and took no time, whatever time its id names."""
        return self.outcome == "cancelled" and not any(
            event.type in _ATTEMPTED for event in self.events
        )

    @property
    def seconds(self) -> float | None:
        """Time from ``begun_at`` to the end; None while the run has not ended, or if it
        never began."""
        begin = self.begun_at
        if self.ended_at is None or begin is None or self.never_began:
            return None
        return (self.ended_at - begin).total_seconds()

    def summary(self) -> dict[str, Any]:
        """The run in one JSON object, as ``warren history --json`` lists it."""
        return {
            "run_id": self.run_id,
            "schedule": self.schedule,
            "task": self.task,
            "outcome": self.outcome,
            "attempts": self.attempts,
            "scheduled_for": _text(self.scheduled_for),
            "ended_at": _text(self.ended_at),
            "seconds": self.seconds,
            "last_error": self.last_error,
            "replays": self.replays,
            "progress": self.progress,
            "last_heartbeat": _text(self.last_heartbeat),
        }

    def story(self) -> dict[str, Any]:
        """The run with every event, as ``warren history show --json`` prints it."""
        return {**self.summary(), "events": [_story_event(e) for e in self.told()]}

    def told(self) -> list[Event]:
        """The events a story tells (``in_order``), but an attempt's ``started`` mark: the
        attempt's own event says when it began (``duration_ms`` before its end)."""
        return [event for event in self.in_order() if event.type != "started"]

    def in_order(self) -> list[Event]:
        """The events in the order they happened (``causal_rank``): neither the stream's
        order (each writer publishes batches of its own) nor the clock alone (a fire and its
        first attempt can share a millisecond, and hosts' clocks differ)."""
        return sorted(self.events, key=lambda event: causal_rank(event, self.replays))


def causal_rank(event: Event, replays: int) -> tuple[int, int, int, datetime, int]:
    """Where ``event`` stands in its run: its replay (0 before the first), then the fire or
    replay, the attempts by number, the failure that ended them, a purge (of the latest of
    the ``replays``); the time and the stream offset only break ties."""
    phase = _PHASES.get(event.type, 1)
    if event.type == "purged":
        replay = replays
    else:
        replay = int(event.get("replay", 1 if event.type == "replayed" else 0))
    number = int(event.get("attempts" if event.type == "failed" else "attempt", 0))
    return replay, phase, number, event.at, event.offset


def _story_event(event: Event) -> dict[str, Any]:
    data = {key: value for key, value in event.data.items() if key != "v"}
    if event.type == "attempt":
        data.setdefault("error", None)  # every attempt has the key; a success holds null
    return data


def run_time(run_id: str) -> datetime | None:
    """The time a run id names (its fire, trigger or enqueue), or None when it names none."""
    match = _RUN_TIME.search(run_id)
    try:
        return datetime.fromisoformat(match.group(1)) if match else None
    except ValueError:  # a foreign client's id that only looks like it names a time
        return None


def _text(moment: datetime | None) -> str | None:
    return None if moment is None else utc_text(moment)


def _ignore(run: Run, event: Event) -> None:
    """Events that change nothing of the run's state (a pause, say)."""


def _fired(run: Run, event: Event) -> None:
    scheduled = event.get("scheduled_for")
    run.scheduled_for = datetime.fromisoformat(scheduled) if scheduled else event.at


def _skipped(run: Run, event: Event) -> None:
    _fired(run, event)
    run.outcome, run.ended_at = "skipped", event.at
    run.last_error = event.get("reason")


def _counted(run: Run, event: Event, attempt: int) -> bool:
    """Count ``attempt`` under its replay, keep its error if it is the latest; False when a
    later replay was seen already."""
    replay = int(event.get("replay", 0))
    run.tries[replay] = max(run.tries.get(replay, 0), attempt)
    run.attempts = sum(run.tries.values())
    if event.get("error") and (replay, attempt) >= run.error_of:
        run.last_error, run.error_of = event.get("error"), (replay, attempt)
    current = replay >= run.replays
    run.replays = max(run.replays, replay)
    return current


def _attempt(run: Run, event: Event) -> None:
    if event.get("reason") in HANDED_OVER:
        return  # the run goes on: its parked copy, or the attempt holding its claim, runs it
    if not _counted(run, event, int(event.get("attempt", 0))):
        return
    outcome = str(event.get("outcome", RUNNING))
    run.outcome = _AFTER_ATTEMPT.get(outcome, outcome)
    run.ended_at = event.at if run.outcome in ENDED else None


def _failed(run: Run, event: Event) -> None:
    if not _counted(run, event, int(event.get("attempts", 0))):
        return
    run.outcome, run.ended_at = "failed", event.at


def _replayed(run: Run, event: Event) -> None:
    replay = int(event.get("replay", run.replays + 1))
    if replay > run.replays:  # else attempts of this replay came first: they tell the outcome
        run.outcome, run.ended_at = RUNNING, None
    run.replays = max(run.replays, replay)


def _cancelled(run: Run, event: Event) -> None:
    """A cancel asked for: the run ends here unless it ended already."""
    if run.outcome not in ENDED:
        run.outcome, run.ended_at = "cancelled", event.at
        run.last_error = event.get("reason") or f"cancelled by {event.get('by')}"


def _purged(run: Run, event: Event) -> None:
    run.purged = True


def _progress(run: Run, event: Event) -> None:
    """A long attempt's summary of its heartbeats (``worker/heartbeat.py``)."""
    if run.last_heartbeat is None or event.at >= run.last_heartbeat:
        run.progress, run.last_heartbeat = event.get("progress"), event.at
        run.heartbeats = int(event.get("heartbeats", 0))


_APPLY = {
    "fired": _fired,
    "triggered": _fired,
    "skipped": _skipped,
    "attempt": _attempt,
    "failed": _failed,
    "replayed": _replayed,
    "purged": _purged,
    "cancelled": _cancelled,
    "progress": _progress,
}


def fold_runs(events: Iterable[Event]) -> dict[str, Run]:
    """Every run the events tell of, by run id, in the order each first appears."""
    runs: dict[str, Run] = {}
    for event in events:
        if event.run_id is None:
            continue
        run = runs.get(event.run_id)
        if run is None:
            run = runs[event.run_id] = Run(event.run_id)
        run.apply(event)
    return runs
