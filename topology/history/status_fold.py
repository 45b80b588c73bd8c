"""The status of each schedule, folded from history events into a few values per schedule.

``warren status`` answers from this fold instead of reading days of events: the monitor keeps it
current and stores it (``topology/history/snapshot.py``) with the stream offset it covers, so
a reader only folds the events after that offset. Each run goes through the outcome rules of
``topology/history/run_fold.py``. The fold keeps only the runs that count: those retrying now and
those that failed (their record waits in the failed queue until a replay or a purge), both
bounded. A run that succeeded, or is merely running, is dropped: a later event of it starts
it afresh, and its events carry what the rules need (the replay they belong to). For each
schedule it keeps the times of its last fire, success and failure, each the latest seen, so
writers' batches that reach the stream out of order change nothing. Beside the schedules it
adds up the events each kind of process reported it dropped (``dropped`` events), kept with
the fold so that the count goes on across a monitor's restarts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from warren_cron.clock import utc_text
from warren_cron.history.events import Event
from warren_cron.history.run_fold import Run

#: Version of the stored fold: a reader of another version starts afresh.
FORMAT = 1
#: Runs kept at most, retrying and failed together (the oldest go first).
KEPT_RUNS = 100_000
#: The outcomes of the runs kept: retrying now, and failed (in the failed queue).
KEPT = ("retrying", "failed")
#: What the rules need of a kept run: schedule, outcome, replays, and the highest attempt of
#: each replay.
Kept = tuple[str, str, int, tuple[tuple[int, int], ...]]
_FIRES = frozenset({"fired", "triggered"})
_TIMES = ("last_fire_at", "last_success_at", "last_failure_at", "watched_since")


@dataclass
class ScheduleState:
    """What the history says of one schedule, and what the monitor watches of it."""

    last_fire_at: datetime | None = None
    last_success_at: datetime | None = None
    last_failure_at: datetime | None = None
    #: Since when the monitor expects successes (its first look, or a resume).
    watched_since: datetime | None = None
    #: True while the monitor's "no success" alert for the schedule is firing.
    silent: bool = False

    @property
    def last_outcome(self) -> str | None:
        """``succeeded`` or ``failed``: the outcome of the run that ended last."""
        success, failure = self.last_success_at, self.last_failure_at
        if failure is not None and (success is None or failure > success):
            return "failed"
        return None if success is None else "succeeded"

    def fired(self, moment: datetime) -> None:
        """Take a fire at ``moment`` into account."""
        self.last_fire_at = _latest(self.last_fire_at, moment)

    def ended(self, run: Run) -> None:
        """Take a run's end into account (a success or a failure; nothing else counts)."""
        if run.ended_at is None:
            return
        if run.outcome == "succeeded":
            self.last_success_at = _latest(self.last_success_at, run.ended_at)
        elif run.outcome == "failed":
            self.last_failure_at = _latest(self.last_failure_at, run.ended_at)

    def to_json(self) -> dict[str, Any]:
        """The state as JSON values; times in UTC."""
        return {**{key: _text(getattr(self, key)) for key in _TIMES}, "silent": self.silent}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScheduleState:
        """The state ``to_json`` wrote."""
        return cls(**{key: _time(data.get(key)) for key in _TIMES}, silent=bool(data["silent"]))


def _latest(known: datetime | None, moment: datetime) -> datetime:
    return moment if known is None else max(known, moment)


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
        #: The runs retrying now and those that failed, by run id, oldest first, each as
        #: ``Kept``: a few hundred bytes instead of a ``Run``'s kilobyte and more.
        self._runs: dict[str, Kept] = {}
        #: History events the fleet reported it dropped, by process kind (``worker`` ...).
        self.lost: dict[str, int] = {}

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
        """Fold one event; events of no run (a pause) change nothing here but a loss."""
        self.offset = max(self.offset, event.offset)
        if event.run_id is None:
            if event.type == "dropped":
                self._lost(event)
            return
        kept = self._runs.pop(event.run_id, None)
        run = Run(event.run_id) if kept is None else _unpacked(event.run_id, kept)
        run.apply(event)
        if run.schedule is None:
            return  # a one-off task: no schedule to report it under
        state = self.state(run.schedule)
        if event.type in _FIRES and run.scheduled_for is not None:
            state.fired(run.scheduled_for)
        state.ended(run)
        if run.outcome in KEPT and not run.purged:
            self._keep(run)

    def _lost(self, event: Event) -> None:
        count, process = event.get("count"), str(event.get("process", "unknown"))
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            self.lost[process] = self.lost.get(process, 0) + count

    def _keep(self, run: Run) -> None:
        assert run.schedule is not None  # runs of no schedule are never kept
        tries = tuple(run.tries.items())
        self._runs[run.run_id] = (run.schedule, run.outcome, run.replays, tries)
        if len(self._runs) > KEPT_RUNS:
            del self._runs[next(iter(self._runs))]

    def counts(self) -> dict[str, tuple[int, int]]:
        """Per schedule: runs retrying now, and runs whose record is in the failed queue."""
        found: dict[str, list[int]] = {}
        for schedule, outcome, *_ in self._runs.values():
            found.setdefault(schedule, [0, 0])[KEPT.index(outcome)] += 1
        return {name: (pair[0], pair[1]) for name, pair in found.items()}

    def dumps(self) -> bytes:
        """The fold as compact JSON."""
        return orjson.dumps(
            {
                "format": FORMAT,
                "offset": self.offset,
                "schedules": {name: s.to_json() for name, s in self.schedules.items()},
                "runs": [[run_id, *kept] for run_id, kept in self._runs.items()],
                "lost": self.lost,
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
        for run_id, schedule, outcome, replays, tries in data["runs"]:
            pairs = tuple((int(replay), int(attempt)) for replay, attempt in tries)
            fold._runs[str(run_id)] = (str(schedule), str(outcome), int(replays), pairs)
        # Absent from a fold stored before losses were reported.
        fold.lost = {str(kind): int(count) for kind, count in data.get("lost", {}).items()}
        return fold


def _unpacked(run_id: str, kept: Kept) -> Run:
    schedule, outcome, replays, tries = kept
    run = Run(run_id, schedule, outcome=outcome, replays=replays, tries=dict(tries))
    run.attempts = sum(run.tries.values())
    return run
