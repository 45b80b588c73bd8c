"""What the overview shows of the last day: attempts per minute by outcome, failures by
reason, and the workers seen, folded from the history stream as it grows.

The monitor follows the stream from a day back when the dashboard starts, so the chart is
whole from the first page, and keeps one small counter per minute; older minutes are dropped.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from warren_cron.history.events import Event
from warren_cron.history.outcomes import HANDED_OVER

#: How far back the overview looks (failures by reason, workers seen).
DAY = timedelta(hours=24)
#: Outcomes the chart draws apart; every other outcome is counted as ``other``.
CHARTED = ("succeeded", "retrying", "failed")


def minute_of(moment: datetime) -> int:
    """Minutes since the epoch: the chart's bucket of ``moment``."""
    return int(moment.timestamp() // 60)


@dataclass(slots=True)
class WorkerSeen:
    """A worker process that ran attempts: where, when last, how many in the day."""

    host: str
    pid: int
    last_at: datetime
    attempts: int = 0


class Activity:
    """Counters of the last day's attempts and failures, fed with history events."""

    def __init__(self) -> None:
        self.attempts: dict[int, Counter[str]] = {}
        self.failures: dict[int, Counter[str]] = {}
        self.workers: dict[tuple[str, int], WorkerSeen] = {}
        self._newest = 0

    def on_events(self, events: list[Event], offset: int) -> None:
        """Count the attempts and failures among ``events`` (a follower's callback)."""
        for event in events:
            if event.type == "attempt":
                self._attempt(event)
            elif event.type == "failed":
                self._bucket(self.failures, event.at)[str(event.get("reason"))] += 1
        self._forget()

    def _attempt(self, event: Event) -> None:
        outcome = str(event.get("outcome"))
        if event.get("reason") not in HANDED_OVER:  # a hand-over ends no attempt: not charted
            self._bucket(self.attempts, event.at)[outcome if outcome in CHARTED else "other"] += 1
        host, pid = event.get("host"), event.get("pid")
        if host is None or pid is None:
            return
        seen = self.workers.setdefault((host, pid), WorkerSeen(host, pid, event.at))
        seen.last_at = max(seen.last_at, event.at)
        seen.attempts += 1

    def _bucket(self, buckets: dict[int, Counter[str]], at: datetime) -> Counter[str]:
        minute = minute_of(at)
        self._newest = max(self._newest, minute)
        found = buckets.get(minute)
        if found is None:
            found = buckets[minute] = Counter()
        return found

    def _forget(self) -> None:
        oldest = self._newest - int(DAY.total_seconds() // 60)
        for buckets in (self.attempts, self.failures):
            for minute in [m for m in buckets if m < oldest]:
                del buckets[minute]
        # Restarted workers come back with a new pid: the old ones leave after a day.
        for key in [k for k, w in self.workers.items() if minute_of(w.last_at) < oldest]:
            del self.workers[key]

    def per_minute(self, now: datetime, minutes: int) -> list[tuple[int, Counter[str]]]:
        """The last ``minutes`` minutes up to ``now``, oldest first, each with its counts."""
        last = minute_of(now)
        empty: Counter[str] = Counter()
        return [(m, self.attempts.get(m, empty)) for m in range(last - minutes + 1, last + 1)]

    def failures_by_reason(self, now: datetime) -> list[tuple[str, int]]:
        """Failures of the last day by reason, the most frequent first."""
        since = minute_of(now - DAY)
        total: Counter[str] = Counter()
        for minute, counts in self.failures.items():
            if minute >= since:
                total.update(counts)
        return total.most_common()

    def workers_seen(self, now: datetime) -> list[WorkerSeen]:
        """Workers with an attempt in the last day, the most recently seen first."""
        recent = (w for w in self.workers.values() if w.last_at >= now - DAY)
        return sorted(recent, key=lambda w: w.last_at, reverse=True)
