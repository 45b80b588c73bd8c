"""Fold events into runs: what happened to one run id, from its fire to its end.

A run's outcome is ``running`` from its fire (or replay) until an attempt ends it:
``succeeded``, ``failed``, ``retrying`` while its plan goes on, ``lock-contended`` or
``replaced`` when its overlap policy settled it, ``skipped`` when the scheduler did not
publish it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from topology.history.events import Event
from topology.schedules.timing import utc_text

RUNNING = "running"
#: Outcomes after which nothing more happens to a run unless someone replays it.
ENDED = frozenset({"succeeded", "failed", "skipped", "lock-contended", "replaced"})
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
    events: list[Event] = field(default_factory=list)

    def apply(self, event: Event) -> None:
        """Take one event of this run into account."""
        self.events.append(event)
        self.schedule = self.schedule or event.schedule
        self.task = self.task or event.get("task")
        self.started_at = self.started_at or event.at
        _APPLY.get(event.type, _ignore)(self, event)

    @property
    def seconds(self) -> float | None:
        """Time from the fire (or the first event) to the end; None while it has not ended."""
        begin = self.scheduled_for or self.started_at
        if self.ended_at is None or begin is None:
            return None
        return (self.ended_at - begin).total_seconds()

    def summary(self) -> dict[str, Any]:
        """The run in one JSON object, as ``history.py --json`` lists it."""
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
        }

    def story(self) -> dict[str, Any]:
        """The run with every event, as ``history.py show --json`` prints it."""
        events = [{key: value for key, value in e.data.items() if key != "v"} for e in self.events]
        return {**self.summary(), "events": events}


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


def _attempt(run: Run, event: Event) -> None:
    run.attempts = max(run.attempts, int(event.get("attempt", 0)))
    outcome = str(event.get("outcome", RUNNING))
    run.outcome = _AFTER_ATTEMPT.get(outcome, outcome)
    run.ended_at = event.at if run.outcome in ENDED else None
    run.last_error = event.get("error") or run.last_error


def _failed(run: Run, event: Event) -> None:
    run.outcome, run.ended_at = "failed", event.at
    run.attempts = max(run.attempts, int(event.get("attempts", 0)))
    run.last_error = event.get("error") or run.last_error


def _replayed(run: Run, event: Event) -> None:
    run.replays += 1
    run.outcome, run.ended_at = RUNNING, None


def _purged(run: Run, event: Event) -> None:
    run.purged = True


_APPLY = {
    "fired": _fired,
    "triggered": _fired,
    "skipped": _skipped,
    "attempt": _attempt,
    "failed": _failed,
    "replayed": _replayed,
    "purged": _purged,
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
