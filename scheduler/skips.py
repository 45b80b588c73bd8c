"""Fires not published: each logged with its reason and written to history as ``skipped``.

A fire missed by the catch-up policy is a warning and counts in ``cron_missed_fires``; one
held back because its schedule is paused is what someone asked for: the pause's first held
fire is an info line, and the held fires of one pause are folded into one ``skipped`` event,
with their ``count`` and the ``last`` of them, written when the pause ends (a resume, or the
leader's term ending while it lasts). One event per fire would fill the history and every
runs page with a red line every few seconds of a pause.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

import structlog

from warren_cron.clock import utc_text
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.runtime.metrics import MISSED_FIRES
from warren_cron.scheduler.firing import Batch, Skipped
from warren_cron.scheduler.pauses import PAUSED
from warren_cron.schedules.schedule import Schedule

log = structlog.get_logger("scheduler")


@dataclass(slots=True)
class Held:
    """The fires of one schedule held back by its pause so far."""

    schedule: Schedule
    first: datetime
    last: datetime
    count: int = 1


class SkipReport:
    """Reports the skipped fires of one term, folding those of each pause."""

    def __init__(self, history: HistoryPublisher) -> None:
        self.history = history
        self._held: dict[str, Held] = {}

    def report(self, batch: Batch, paused: Collection[str]) -> None:
        """Log and record every fire of ``batch`` not published; close the folds of pauses
        that ended (``paused``: the schedules paused now)."""
        for skipped in batch.skipped:
            if skipped.reason == PAUSED:
                self._hold(skipped)
            else:
                _report(skipped, self.history)
        for schedule, oldest in batch.unlisted:
            log.warning(
                "more fires skipped",
                schedule=schedule.name,
                before=utc_text(oldest),
                reason="missed by more than misfire_grace_seconds",
            )
        for name in [name for name in self._held if name not in paused]:
            self._close(name)

    def close(self) -> None:
        """Record the folds still open: the term ends while their pauses last."""
        for name in list(self._held):
            self._close(name)

    def _hold(self, skipped: Skipped) -> None:
        name, fire = skipped.schedule.name, skipped.fire
        held = self._held.get(name)
        if held is not None:
            held.count, held.last = held.count + 1, fire
            return
        self._held[name] = Held(skipped.schedule, fire, fire)
        log.info(
            "fire skipped",
            schedule=name,
            run_id=skipped.schedule.run_id(fire),
            scheduled_for=utc_text(fire),
            reason=PAUSED,
            note="the fires of this pause are counted, and recorded once it ends",
        )

    def _close(self, name: str) -> None:
        held = self._held.pop(name)
        first, last = utc_text(held.first), utc_text(held.last)
        log.info("fires skipped while paused", schedule=name, count=held.count, first=first)
        run_id = held.schedule.run_id(held.first)
        fields = {"reason": PAUSED, "count": held.count, "last": last}
        self.history.emit(held.schedule.event("skipped", run_id, first, **fields))


def _report(skipped: Skipped, history: HistoryPublisher) -> None:
    schedule, reason = skipped.schedule, skipped.reason
    run_id, scheduled_for = schedule.run_id(skipped.fire), utc_text(skipped.fire)
    MISSED_FIRES.labels(schedule=schedule.name).inc()
    log.warning(
        "fire skipped",
        schedule=schedule.name,
        run_id=run_id,
        scheduled_for=scheduled_for,
        reason=reason,
    )
    history.emit(schedule.event("skipped", run_id, scheduled_for, reason=reason))
