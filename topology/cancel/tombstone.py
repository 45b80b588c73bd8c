"""A tombstone: what one cancel says, checked, encoded and decoded in one place."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson

from warren_cron.cancel.bounds import MAX_REASON as MAX_REASON
from warren_cron.clock import utc_text
from warren_cron.errors import CancelError

SCHEMA = 1
#: The longest run id a cancel takes: longer ones are no run id warren makes.
MAX_RUN_ID = 300
#: How long after a run's due time (or after the cancel, when that is later or the due time
#: is unknown) its tombstone is kept: the longest retry plan and delay a run may still spend
#: before it starts. A run due later than this after its cancel is cancelled with ``until``.
HORIZON = timedelta(days=30)


@dataclass(frozen=True, slots=True)
class Tombstone:
    """One cancel: of run ``run_id``, or of ``schedule``'s fires due at or before ``before``."""

    at: datetime
    until: datetime
    by: str
    reason: str | None = None
    run_id: str | None = None
    schedule: str | None = None
    before: datetime | None = None

    def why(self) -> str:
        """The error text of a run this tombstone cancelled."""
        what = "run" if self.run_id is not None else f"schedule {self.schedule!r} archived"
        because = f": {self.reason}" if self.reason else ""
        return f"{what} cancelled by {self.by}{because}"


def checked_run_id(run_id: object) -> str:
    """``run_id`` when it can be a run id; ``CancelError`` naming what is wrong."""
    if not isinstance(run_id, str) or not 0 < len(run_id) <= MAX_RUN_ID:
        raise CancelError(f"run id: give 1 to {MAX_RUN_ID} characters")
    if not run_id.isprintable():
        raise CancelError("run id: printable characters only (as `warren runs show` prints it)")
    return run_id


def checked_reason(reason: object) -> str | None:
    """``reason`` when it fits; ``CancelError`` when it is no text or over ``MAX_REASON``."""
    if reason is None or reason == "":
        return None
    if not isinstance(reason, str):
        raise CancelError("reason: give a text")
    if len(reason) > MAX_REASON:
        raise CancelError(f"reason: {len(reason)} characters, at most {MAX_REASON}: shorten it")
    return reason


def encode(tombstone: Tombstone) -> bytes:
    """The body of one stream message."""
    fields: dict[str, Any] = {
        "v": SCHEMA,
        "at": utc_text(tombstone.at),
        "until": utc_text(tombstone.until),
        "by": tombstone.by,
        "reason": tombstone.reason,
        "run_id": tombstone.run_id,
        "schedule": tombstone.schedule,
        "before": None if tombstone.before is None else utc_text(tombstone.before),
    }
    return orjson.dumps({key: value for key, value in fields.items() if value is not None})


def decode(body: bytes) -> Tombstone | None:
    """The tombstone of one stream message; None for anything else (a marker, a newer
    schema, garbage): a reader passes over what it cannot use."""
    try:
        data = orjson.loads(body)
        if not isinstance(data, dict) or data.get("v") != SCHEMA:
            return None
        tombstone = Tombstone(
            at=datetime.fromisoformat(data["at"]),
            until=datetime.fromisoformat(data["until"]),
            by=str(data["by"]),
            reason=_text(data.get("reason")),
            run_id=_text(data.get("run_id")),
            schedule=_text(data.get("schedule")),
            before=None if data.get("before") is None else datetime.fromisoformat(data["before"]),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
    aimed = tombstone.run_id is not None or None not in (tombstone.schedule, tombstone.before)
    return tombstone if aimed else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
