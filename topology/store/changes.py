"""A change to the runtime schedules, and a schedule as the changes left it.

Every change names the version it was based on (``previous``; 0 for a schedule that never
existed) and the one it makes (``previous + 1``), who made it, when, why, and the whole spec
after it (none for an archive). The log holds changes in one order that every reader sees,
so the fold in ``topology/store/state.py`` gives every reader the same answer.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import orjson

from warren_cron.clock import utc_text, utcnow
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.trusted import trusted_spec

Kind = Literal["create", "update", "archive"]
KINDS: frozenset[str] = frozenset(Kind.__args__)  # type: ignore[attr-defined]
Status = Literal["active", "archived"]
#: Changes kept per schedule in snapshots: the history of a schedule, newest last.
HISTORY_KEPT = 50


@dataclass(frozen=True, slots=True)
class Change:
    """One create, update or archive of a runtime schedule."""

    kind: Kind
    name: str
    previous: int
    by: str
    reason: str | None = None
    #: The schedule's whole spec after the change (JSON); None for an archive.
    spec: dict[str, Any] | None = None
    #: The file whose apply made the change (``warren schedules apply``); None otherwise.
    manager: str | None = None
    at: datetime = field(default_factory=utcnow)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def version(self) -> int:
        """The version this change makes."""
        return self.previous + 1

    def meta(self) -> dict[str, Any]:
        """The change without its spec: one line of the schedule's history."""
        return {
            "kind": self.kind,
            "version": self.version,
            "previous": self.previous,
            "by": self.by,
            "at": utc_text(self.at),
            "reason": self.reason,
            **({"manager": self.manager} if self.manager else {}),
        }

    def to_json(self) -> dict[str, Any]:
        """The change as stored in the log."""
        return {**self.meta(), "v": 1, "id": self.id, "name": self.name, "spec": self.spec}

    @classmethod
    def from_json(cls, data: Any) -> Change | None:
        """The change a log message holds; None for a body of no known shape."""
        try:
            if data["v"] != 1 or data["kind"] not in KINDS:
                return None
            return cls(
                kind=data["kind"],
                name=str(data["name"]),
                previous=int(data["previous"]),
                by=str(data["by"]),
                reason=data.get("reason"),
                spec=data.get("spec"),
                manager=data.get("manager"),
                at=datetime.fromisoformat(data["at"]),
                id=str(data["id"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(slots=True)
class Entry:
    """A runtime schedule as the changes so far left it."""

    spec: ScheduleSpec
    version: int
    status: Status
    #: Each change's ``meta()``, oldest first, the last ``HISTORY_KEPT`` of them.
    history: list[dict[str, Any]]
    #: The file that manages the schedule (its last apply), and the version that apply made.
    manager: str | None = None
    applied: int = 0
    #: ``spec_json(spec)``, kept once made: a snapshot of 100,000 specs is written every
    #: thousand changes, and dumping each spec every time would take a second.
    spec_data: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    #: ``to_json()`` encoded, kept once made: an entry is replaced, never changed, by a
    #: change, so each snapshot re-encodes only the entries changed since the last one.
    encoded: orjson.Fragment | None = field(default=None, repr=False, compare=False)
    #: When its fires are first owed: the ``at`` of its create, or of the last change of its
    #: timing (``TIMING_FIELDS``); for a record written before it was kept, see ``from_json``.
    since: datetime | None = None

    def fragment(self) -> orjson.Fragment:
        """``to_json()`` as JSON, made once."""
        if self.encoded is None:
            self.encoded = orjson.Fragment(orjson.dumps(self.to_json()))
        return self.encoded

    def to_json(self) -> dict[str, Any]:
        """The entry as a snapshot holds it."""
        if self.spec_data is None:
            self.spec_data = spec_json(self.spec)
        return {
            "spec": self.spec_data,
            "version": self.version,
            "status": self.status,
            "history": self.history,
            "manager": self.manager,
            "applied": self.applied,
            **({"since": utc_text(self.since)} if self.since else {}),
        }

    @classmethod
    def from_json(cls, name: str, data: dict[str, Any]) -> Entry:
        """An entry of a snapshot; ``ValueError`` (or ``TypeError``, ``KeyError``) naming
        what is wrong when it is not one warren wrote."""
        status = data["status"]
        manager = data.get("manager")
        if status not in ("active", "archived") or not isinstance(manager, str | None):
            raise ValueError(f"{name}: status {status!r}, manager {manager!r}")
        if not isinstance(data["history"], list):
            raise TypeError(f"{name}: history is not a list")
        spec = trusted_spec(name, data["spec"])
        return cls(
            spec,
            int(data["version"]),
            status,
            data["history"],
            manager,
            int(data.get("applied", 0)),
            data["spec"],
            since=_moment(data.get("since")) or _created(data["history"]),
        )


def _created(history: list[dict[str, Any]]) -> datetime | None:
    # A record without ``since``: its last create, else the oldest change the history holds
    # (the schedule existed then), else unknown: no bound, as before the time was kept.
    made = [item for item in history if isinstance(item, dict) and item.get("kind") == "create"]
    known = made[-1] if made else history[0] if history and isinstance(history[0], dict) else {}
    return _moment(known.get("at"))


def _moment(text: object) -> datetime | None:
    # A time in a record; one unreadable counts as unknown (no bound), as a missing one.
    try:
        return datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None


def spec_json(spec: ScheduleSpec) -> dict[str, Any]:
    """The spec as JSON, fields left at their defaults left out."""
    return spec.model_dump(mode="json", exclude_defaults=True)
