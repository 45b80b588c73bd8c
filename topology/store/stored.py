"""A runtime schedule as the store gives it: spec, version, status, pause and history."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from warren_cron.clock import utc_text
from warren_cron.schedules.control import Pause
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.apply import SCHEDULER_FILE
from warren_cron.store.masking import shown_spec

Status = Literal["active", "paused", "completed", "archived"]


@dataclass(frozen=True, slots=True)
class StoredSchedule:
    """A runtime schedule: its spec, version, status and the history of its changes."""

    name: str
    spec: ScheduleSpec
    version: int
    status: Status
    #: One dict per change, oldest first: kind, version, previous, by, at, reason.
    history: list[dict[str, Any]]
    pause: Pause | None = None
    #: The file whose apply manages it (``CRON_SCHEDULES_FILE``: the scheduler's own file).
    manager: str | None = None
    #: When its fires are first owed: its creation, or the last change of its timing.
    since: datetime | None = None

    @property
    def from_file(self) -> bool:
        """Whether this is the store's copy of a schedule of the scheduler's own file."""
        return self.manager == SCHEDULER_FILE

    def to_json(self) -> dict[str, Any]:
        """The schedule as ``get --json`` prints it."""
        return {
            "name": self.name,
            "source": "runtime",
            "status": self.status,
            "version": self.version,
            "manager": self.manager,
            "spec": shown_spec(self.spec),
            **pause_fields(self.pause),
            "history": self.history,
        }


def pause_fields(pause: Pause | None) -> dict[str, Any]:
    """A schedule's pause as JSON fields (all None when it is not paused)."""
    return {
        "paused": pause is not None,
        "paused_since": utc_text(pause.since) if pause else None,
        "paused_by": pause.by if pause else None,
        "reason": pause.reason if pause else None,
    }
