"""The long attempts running now, for the overview: folded from their heartbeat summaries
(``progress`` events, ``worker/heartbeat.py``) in the history the dashboard follows.

A run enters with its first ``progress`` event and leaves with the event that ends its
attempt or the run; a hand-over to another worker (``HANDED_OVER``) keeps it. One that says
nothing for a day is forgotten, as the overview forgets everything older.
"""

from __future__ import annotations

from datetime import datetime

from warren_cron.history.events import Event
from warren_cron.history.lifecycle import ends
from warren_cron.history.run_fold import Run
from warren_cron.monitor.console.activity import DAY


class LongRunsSeen:
    """Runs whose long attempt beats, by run id, each with its last progress."""

    def __init__(self) -> None:
        self.running: dict[str, Run] = {}

    def on_events(self, events: list[Event], offset: int) -> None:
        """Take the heartbeat summaries and the ends among ``events`` (a follower's callback)."""
        for event in events:
            if event.run_id is None:
                continue
            if event.type == "progress":
                self.running.setdefault(event.run_id, Run(event.run_id)).apply(event)
            elif ends(event):
                self.running.pop(event.run_id, None)

    def now(self, now: datetime) -> list[Run]:
        """The long runs heard from in the last day, the most recently heard first."""
        for run_id in [r for r, run in self.running.items() if _heard(run) < now - DAY]:
            del self.running[run_id]
        return sorted(self.running.values(), key=_heard, reverse=True)


def _heard(run: Run) -> datetime:
    assert run.last_heartbeat is not None  # every run here came with a progress event
    return run.last_heartbeat
