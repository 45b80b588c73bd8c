"""Fires not published: each logged with its reason and written to history as ``skipped``.

A fire missed by the catch-up policy is a warning and counts in ``cron_missed_fires``; one
held back because its schedule is paused is what someone asked for: an info line.
"""

from __future__ import annotations

import structlog

from warren_cron.clock import utc_text
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.runtime.metrics import MISSED_FIRES
from warren_cron.scheduler.firing import Batch, Skipped
from warren_cron.scheduler.pauses import PAUSED

log = structlog.get_logger("scheduler")


def report_skipped(batch: Batch, history: HistoryPublisher) -> None:
    """Log every fire of ``batch`` that is not published, and emit its ``skipped`` event."""
    for skipped in batch.skipped:
        _report(skipped, history)
    for schedule, oldest in batch.unlisted:
        log.warning(
            "more fires skipped",
            schedule=schedule.name,
            before=utc_text(oldest),
            reason="missed by more than misfire_grace_seconds",
        )


def _report(skipped: Skipped, history: HistoryPublisher) -> None:
    schedule, reason = skipped.schedule, skipped.reason
    run_id, scheduled_for = schedule.run_id(skipped.fire), utc_text(skipped.fire)
    if reason != PAUSED:
        MISSED_FIRES.labels(schedule=schedule.name).inc()
    getattr(log, "info" if reason == PAUSED else "warning")(
        "fire skipped",
        schedule=schedule.name,
        run_id=run_id,
        scheduled_for=scheduled_for,
        reason=reason,
    )
    history.emit(schedule.event("skipped", run_id, scheduled_for, reason=reason))
