"""Ask for a cancel: check the run, store its tombstone, then tell the history.

The tombstone is stored (confirmed) before the ``cancelled`` event is written: a history
that says a run was cancelled never lacks the tombstone that makes it so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel

from warren_cron.cancel.stream import store
from warren_cron.cancel.tombstone import (
    HORIZON,
    MAX_REASON,
    Tombstone,
    checked_reason,
    checked_run_id,
)
from warren_cron.clock import utc_text, utcnow
from warren_cron.history.events import encode, event, excerpt
from warren_cron.history.lifecycle import RunStatus
from warren_cron.names import Names


@dataclass(frozen=True, slots=True)
class CancelAnswer:
    """What came of a cancel: ``cancelled`` False when the run had ended already (a run
    cancelled already is cancelled: asking again is no error)."""

    run_id: str
    #: The run's state when the cancel was asked for.
    state: str
    cancelled: bool
    message: str

    def as_json(self) -> dict[str, object]:
        """The answer as one JSON object (``--json``, the HTTP API)."""
        return {
            "run_id": self.run_id,
            "state": self.state,
            "cancelled": self.cancelled,
            "message": self.message,
        }


def run_tombstone(
    status: RunStatus, by: str, reason: str | None, now: datetime, until: datetime | None
) -> Tombstone:
    """The tombstone of a cancel of ``status``'s run, kept ``HORIZON`` past its due time."""
    due = max(now, status.due or now)
    keep = max(due + HORIZON, until or due)
    return Tombstone(at=now, until=keep, by=by, reason=reason, run_id=status.run_id)


async def cancel_run(
    channel: AbstractChannel,
    names: Names,
    status: RunStatus,
    by: str,
    reason: str | None,
    until: datetime | None = None,
) -> CancelAnswer:
    """Cancel the run of ``status`` (its state read just before); ``channel`` has confirms."""
    checked_run_id(status.run_id)
    reason = checked_reason(reason)
    if status.state == "cancelled":  # asked twice, or by two at once: the first one holds
        said = f"run {status.run_id} was cancelled already: it will not run"
        return CancelAnswer(status.run_id, status.state, True, said)
    if status.done:
        why = f"run {status.run_id} already ended ({status.state}): nothing to cancel"
        return CancelAnswer(status.run_id, status.state, False, why)
    tombstone = run_tombstone(status, by, reason, utcnow(), until)
    await store(channel, names, tombstone)
    ids: dict[str, Any] = {
        "run_id": status.run_id,
        "schedule": status.schedule,
        "task": status.task,
    }
    told = event("cancelled", **ids, by=by, reason=reason, until=utc_text(tombstone.until))
    body = aio_pika.Message(encode([told]), delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
    await channel.default_exchange.publish(body, names.history_stream, mandatory=True)
    return CancelAnswer(status.run_id, status.state, True, _done(status))


def _done(status: RunStatus) -> str:
    if status.state == "running":
        return f"run {status.run_id} cancelled: its running attempt is being stopped"
    if not status.attempts and status.task is None:
        return (
            f"run {status.run_id} cancelled (no event of it yet: if it is waiting, it will "
            "not start)"
        )
    return f"run {status.run_id} cancelled ({status.state}): it will not start"


async def archive_tombstone(
    channel: AbstractChannel, names: Names, schedule: str, by: str, reason: str | None
) -> Tombstone:
    """Store the tombstone of schedule ``schedule``'s fires due until now (its archive)."""
    now, why = utcnow(), excerpt(reason, MAX_REASON)
    tombstone = Tombstone(
        at=now, until=now + HORIZON, by=by, reason=why, schedule=schedule, before=now
    )
    await store(channel, names, tombstone)
    return tombstone
