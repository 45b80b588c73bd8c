"""The runs the dashboard lists and shows at once: kept in memory from the history it follows.

Reading a run's story from the stream means reading everything after it, which on a busy
install takes seconds. The dashboard already follows the last day of history (for the
overview's counters), so it folds the runs it sees as well and keeps a bounded few: the last
``PER_SCHEDULE`` runs of each schedule, and up to ``NOTABLE`` runs that did not simply
succeed (failed, retried, triggered, skipped, replayed or purged). A run whose start it saw is
shown from memory; any other is read from the stream, as ``warren history show`` does.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable

from warren_cron.history.events import Event
from warren_cron.history.recent import newest_first
from warren_cron.history.run_fold import Run

PER_SCHEDULE = 5
NOTABLE = 10_000
#: Events that begin a run: a run kept from one of them holds its whole story.
STARTS = frozenset({"fired", "triggered", "skipped"})
_PLAIN = frozenset({"fired", "started", "attempt"})


class RecentRuns:
    """Runs folded from followed events, bounded per schedule and in number of notable ones."""

    def __init__(self, per_schedule: int = PER_SCHEDULE, notable: int = NOTABLE) -> None:
        self.runs: dict[str, Run] = {}
        self._per_schedule = per_schedule
        self._notable_cap = notable
        self._latest: dict[str, deque[str]] = {}
        self._notable: OrderedDict[str, None] = OrderedDict()

    def on_events(self, events: list[Event], offset: int) -> None:
        """Fold each event of a run into its run (a follower's callback)."""
        for event in events:
            if event.run_id is not None:
                self._apply(event.run_id, event)

    def _apply(self, run_id: str, event: Event) -> None:
        run = self.runs.get(run_id)
        if run is None:
            run = self.runs[run_id] = Run(run_id)
            run.apply(event)
            self._remember(run_id, run.schedule or "")
        else:
            run.apply(event)
        if event.type not in _PLAIN or run.outcome not in ("succeeded", "running"):
            self._notable[run_id] = None
            self._notable.move_to_end(run_id)
            if len(self._notable) > self._notable_cap:
                self._drop(self._notable.popitem(last=False)[0])

    def _remember(self, run_id: str, schedule: str) -> None:
        latest = self._latest.setdefault(schedule, deque())
        latest.append(run_id)
        if len(latest) > self._per_schedule:
            self._drop(latest.popleft())

    def _drop(self, run_id: str) -> None:
        run = self.runs.get(run_id)
        if run is None or run_id in self._notable:
            return
        if run_id in self._latest.get(run.schedule or "", ()):
            return
        del self.runs[run_id]

    def whole(self, run_id: str) -> Run | None:
        """The run, if it is kept with its start (its whole story); else None."""
        run = self.runs.get(run_id)
        if run is None or not any(event.type in STARTS for event in run.events):
            return None
        return run

    def newest(self, want: Callable[[Run], bool], limit: int) -> list[Run]:
        """The ``limit`` newest kept runs that ``want`` accepts."""
        return newest_first([run for run in self.runs.values() if want(run)])[:limit]
