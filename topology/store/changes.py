"""A change to the runtime schedules, and a schedule as the changes left it.

Every change names the version it was based on (``previous``; 0 for a schedule that never
existed) and the one it makes (``previous + 1``), who made it, when, why, and the whole spec
after it (none for an archive). The log holds changes in one order that every reader sees,
so the fold in ``topology/store/state.py`` gives every reader the same answer.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import orjson

from warren_cron.clock import utc_text, utcnow
from warren_cron.schedules.spec import ScheduleSpec, json_bytes, spec_json
from warren_cron.schedules.trusted import trusted_spec

__all__ = ["HISTORY_KEPT", "KINDS", "Change", "Entry", "Kind", "Status", "spec_json"]

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
                name=sys.intern(str(data["name"])),
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


class Entry:
    """A runtime schedule as the changes so far left it, held compact: its spec and its
    history as the JSON bytes they are stored as, decoded only when asked for. A leader of
    a million schedules holds a few hundred bytes for each, not the 2.5 KB a validated spec
    and its history take (``bench.py memory``)."""

    __slots__ = ("_history", "applied", "manager", "since", "spec_bytes", "status", "version")

    def __init__(
        self,
        spec: ScheduleSpec | bytes,
        version: int,
        status: Status,
        history: list[dict[str, Any]] | bytes,
        manager: str | None = None,
        applied: int = 0,
        since: datetime | None = None,
    ) -> None:
        #: ``spec_json(spec)`` encoded: what a snapshot holds, and what ``spec`` decodes.
        self.spec_bytes = spec if isinstance(spec, bytes) else json_bytes(spec_json(spec))
        self.version = version
        self.status: Status = status
        self._history = history if isinstance(history, bytes) else json_bytes(history)
        #: The file that manages the schedule (its last apply), and the version that apply made.
        self.manager = manager
        self.applied = applied
        #: When its fires are first owed: the ``at`` of its create, or of the last change of
        #: its timing (``TIMING_FIELDS``); for a record written before it was kept, see
        #: ``from_json``.
        self.since = since

    @property
    def spec(self) -> ScheduleSpec:
        """The spec, decoded anew (a few microseconds; checked when it was folded in)."""
        data = orjson.loads(self.spec_bytes)
        return trusted_spec(str(data.get("name")), data)

    @property
    def history(self) -> list[dict[str, Any]]:
        """Each change's ``meta()``, oldest first, the last ``HISTORY_KEPT`` of them."""
        data: list[dict[str, Any]] = orjson.loads(self._history)
        return data

    @property
    def last_change(self) -> dict[str, Any]:
        """The newest change's ``meta()``; empty when none is known."""
        history = self.history
        return history[-1] if history else {}

    def fragment(self) -> orjson.Fragment:
        """``to_json()`` as JSON: the spec and history as held, not decoded."""
        # In bytes of its own size: a snapshot holds one for every schedule until written.
        return orjson.Fragment(json_bytes(self._fields(orjson.Fragment)))

    def to_json(self) -> dict[str, Any]:
        """The entry as a snapshot holds it."""
        return self._fields(orjson.loads)

    def _fields(self, read: Any) -> dict[str, Any]:
        return {
            "spec": read(self.spec_bytes),
            "version": self.version,
            "status": self.status,
            "history": read(self._history),
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
        trusted_spec(name, data["spec"])  # checked here, decoded again when asked for
        return cls(
            json_bytes(data["spec"]),
            int(data["version"]),
            status,
            data["history"],
            manager,
            int(data.get("applied", 0)),
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
