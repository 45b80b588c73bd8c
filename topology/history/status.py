"""The status of each schedule, folded from history events into a few values per schedule.

``status.py`` answers from this fold instead of reading days of events: the monitor keeps it
current and stores it (``topology/history/snapshot.py``) with the stream offset it covers, so
a reader only folds the events after that offset. Each run goes through the outcome rules of
``topology/history/runs.py``; the fold keeps only the runs still open (running or retrying)
and the run ids whose last event is ``failed`` (their record waits in the failed queue), both
bounded, and for each schedule its last fire, success, failure and outcome.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from topology.history.events import Event
from topology.history.runs import ENDED, Run
from topology.schedules.timing import utc_text

#: Version of the stored fold: a reader of another version starts afresh.
FORMAT = 1
#: Open runs kept at most (the oldest go first): runs whose end never reached the stream.
OPEN_RUNS = 50_000
#: Failed run ids kept at most; counts past it are low.
FAILED_RUNS = 50_000
#: Outcomes that count as a schedule's last outcome.
OUTCOMES = ("succeeded", "failed")
_FIRES = frozenset({"fired", "triggered"})
_TIMES = ("last_fire_at", "last_success_at", "last_failure_at", "watched_since")


@dataclass
class ScheduleState:
    """What the history says of one schedule, and what the monitor watches of it."""

    last_fire_at: datetime | None = None
    #: ``succeeded`` or ``failed``: the outcome of the run that ended last.
    last_outcome: str | None = None
    last_success_at: datetime | None = None
    last_failure_at: datetime | None = None
    #: Since when the monitor expects successes (its first look, or a resume).
    watched_since: datetime | None = None
    #: True while the monitor's "no success" alert for the schedule is firing.
    silent: bool = False

    def ended(self, run: Run) -> None:
        """Take a run that has just ended into account."""
        if run.outcome not in OUTCOMES or run.ended_at is None:
            return
        self.last_outcome = run.outcome
        if run.outcome == "succeeded":
            self.last_success_at = run.ended_at
        else:
            self.last_failure_at = run.ended_at

    def to_json(self) -> dict[str, Any]:
        """The state as JSON values; times in UTC."""
        data: dict[str, Any] = {key: _text(getattr(self, key)) for key in _TIMES}
        return {**data, "last_outcome": self.last_outcome, "silent": self.silent}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScheduleState:
        """The state ``to_json`` wrote."""
        times = {key: _time(data.get(key)) for key in _TIMES}
        return cls(**times, last_outcome=data.get("last_outcome"), silent=bool(data.get("silent")))


def _text(moment: datetime | None) -> str | None:
    return None if moment is None else utc_text(moment)


def _time(text: Any) -> datetime | None:
    return datetime.fromisoformat(text) if isinstance(text, str) else None


class StatusFold:
    """Every schedule's state after the events folded so far, up to stream offset ``offset``."""

    def __init__(self) -> None:
        #: The offset of the last stream message folded; -1 before any.
        self.offset = -1
        self.schedules: dict[str, ScheduleState] = {}
        self._open: dict[str, Run] = {}
        self._failed: dict[str, str] = {}

    def state(self, name: str) -> ScheduleState:
        """The state of schedule ``name`` (a blank one if the history never named it)."""
        state = self.schedules.get(name)
        if state is None:
            state = self.schedules[name] = ScheduleState()
        return state

    def apply_all(self, events: Iterable[Event]) -> None:
        """Fold events in stream order."""
        for event in events:
            self.apply(event)

    def apply(self, event: Event) -> None:
        """Fold one event; events of no run (a pause) change nothing here."""
        self.offset = max(self.offset, event.offset)
        if event.run_id is None:
            return
        run = self._run(event.run_id, event.schedule)
        run.apply(event)
        self._failed.pop(run.run_id, None)
        if run.schedule is None:
            return  # a one-off task: no schedule to report it under
        state = self.state(run.schedule)
        if event.type in _FIRES and run.scheduled_for is not None:
            state.last_fire_at = max(state.last_fire_at or run.scheduled_for, run.scheduled_for)
        if event.type == "failed":
            _bounded_put(self._failed, run.run_id, run.schedule, FAILED_RUNS)
        if run.outcome in ENDED or run.purged:
            state.ended(run)
        else:
            _bounded_put(self._open, run.run_id, run, OPEN_RUNS)

    def _run(self, run_id: str, schedule: str | None) -> Run:
        # A run leaves the open ones when it ends; a later event (a replay) opens it again.
        run = self._open.pop(run_id, None)
        if run is None:
            run = Run(run_id, schedule or self._failed.get(run_id))
        run.events.clear()  # kept open for its state only, not its story
        return run

    def counts(self) -> dict[str, tuple[int, int]]:
        """Per schedule: runs retrying now, and runs whose record is in the failed queue."""
        found: dict[str, list[int]] = {}
        for run in self._open.values():
            if run.outcome == "retrying" and run.schedule is not None:
                found.setdefault(run.schedule, [0, 0])[0] += 1
        for schedule in self._failed.values():
            found.setdefault(schedule, [0, 0])[1] += 1
        return {name: (pair[0], pair[1]) for name, pair in found.items()}

    def dumps(self) -> bytes:
        """The fold as compact JSON."""
        return orjson.dumps(
            {
                "format": FORMAT,
                "offset": self.offset,
                "schedules": {name: s.to_json() for name, s in self.schedules.items()},
                "open": {
                    r.run_id: [r.schedule, r.outcome, r.attempts] for r in self._open.values()
                },
                "failed": self._failed,
            }
        )

    @classmethod
    def loads(cls, body: bytes) -> StatusFold:
        """The fold ``dumps`` wrote; ``ValueError`` for anything else."""
        try:
            data = orjson.loads(body)
            if data.get("format") != FORMAT:
                raise ValueError(f"fold format {data.get('format')!r}, not {FORMAT}")
            return cls._restore(data)
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError) as error:
            raise ValueError(f"not a status fold: {error!r}") from None

    @classmethod
    def _restore(cls, data: dict[str, Any]) -> StatusFold:
        fold = cls()
        fold.offset = int(data["offset"])
        fold.schedules = {n: ScheduleState.from_json(s) for n, s in data["schedules"].items()}
        for run_id, (schedule, outcome, attempts) in data["open"].items():
            fold._open[run_id] = Run(run_id, schedule, outcome=outcome, attempts=attempts)
        fold._failed = {str(run_id): str(name) for run_id, name in data["failed"].items()}
        return fold


def _bounded_put(store: dict[str, Any], key: str, value: Any, limit: int) -> None:
    store[key] = value
    if len(store) > limit:
        del store[next(iter(store))]
