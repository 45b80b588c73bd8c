"""The fold: the runtime schedules after a sequence of changes, the same for every reader.

A change applies only when it was based on the schedule's current version, so of two
changes based on the same version the first in the log wins and the second is refused,
whoever reads the log; its writer learns that by reading its own change back. A change
refused leaves nothing behind but its place in the log.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import ValidationError

from warren_cron.errors import (
    InvalidSchedule,
    NameTaken,
    ScheduleNotFound,
    StoreError,
    VersionConflict,
    validation_problems,
)
from warren_cron.schedules.spec import ScheduleSpec, json_bytes, spec_json
from warren_cron.store.changes import HISTORY_KEPT, Change, Entry, Status


class StoreState:
    """Every runtime schedule by name, and the log offset folded up to."""

    def __init__(self, entries: dict[str, Entry] | None = None, offset: int = -1) -> None:
        self.entries: dict[str, Entry] = entries or {}
        #: The offset of the last log message folded in; -1 before any.
        self.offset = offset
        #: The log offset the newest snapshot known covers; -1 without one.
        self.snapshot_offset = offset

    def version(self, name: str) -> int:
        """The schedule's current version; 0 when it never existed."""
        entry = self.entries.get(name)
        return 0 if entry is None else entry.version

    def active(self) -> dict[str, ScheduleSpec]:
        """The spec of every schedule that is not archived, by name."""
        return {n: e.spec for n, e in self.entries.items() if e.status == "active"}

    def refusal(self, change: Change) -> StoreError | None:
        """Why ``change`` cannot apply now; None when it can."""
        entry = self.entries.get(change.name)
        if change.kind == "create" and entry is not None and entry.status == "active":
            last = entry.last_change
            return NameTaken(
                f"schedule {change.name!r} exists (version {entry.version}, by "
                f"{last.get('by', '?')} at {last.get('at', '?')}); update it, or archive it "
                "first"
            )
        if change.kind != "create" and (entry is None or entry.status == "archived"):
            state = "never existed" if entry is None else f"is archived (version {entry.version})"
            return ScheduleNotFound(
                f"schedule {change.name!r} {state}: create it (list_schedules shows the others)"
            )
        if change.previous != self.version(change.name):
            return VersionConflict(change.name, change.previous, self.version(change.name))
        return None

    def apply(self, change: Change, checked: ScheduleSpec | None = None) -> StoreError | None:
        """Fold ``change`` in; returns why it was refused, or None when it applied.

        ``checked``: the spec whose ``spec_json`` is ``change.spec``, validated by this
        process (its writer) before it was sent: folded in without validating it again."""
        refused = self.refusal(change)
        if refused is not None:
            return refused
        entry = self.entries.get(change.name)
        trusted = checked is not None and change.spec is not None and checked.name == change.name
        try:
            spec = _new_spec(change, entry, checked if trusted else None)
        except InvalidSchedule as error:
            return error
        history = [*(entry.history if entry else []), change.meta()][-HISTORY_KEPT:]
        status: Status = "archived" if change.kind == "archive" else "active"
        held = _held(change, entry, spec, trusted)
        since = _since(change, entry, spec)
        self.entries[change.name] = Entry(
            held, change.version, status, history, *_managed(change, entry), since=since
        )
        return None


def _managed(change: Change, entry: Entry | None) -> tuple[str | None, int]:
    # An apply takes the schedule over; other changes keep its manager, so the next apply
    # sees the store changed since (version past ``applied``); a plain create frees it.
    if change.manager is not None:
        return change.manager, change.version
    if entry is None or change.kind == "create":
        return None, 0
    return entry.manager, entry.applied


def _held(change: Change, entry: Entry | None, spec: ScheduleSpec, trusted: bool) -> bytes:
    # The spec's JSON as the entry keeps it: the writer's own when it was checked here, the
    # last one for an archive, else dumped from the spec just validated.
    if change.spec is None and entry is not None:
        return entry.spec_bytes
    if trusted:
        return json_bytes(change.spec)
    return json_bytes(spec_json(spec))


def _since(change: Change, entry: Entry | None, spec: ScheduleSpec) -> datetime | None:
    # A create, or a change of when it fires, makes the schedule new as far as its fires go:
    # none before it is owed (a leader idle since before it must not publish one).
    if entry is None or change.kind == "create":
        return change.at
    if change.kind == "update" and entry.spec.timing_key() != spec.timing_key():
        return change.at
    return entry.since


def _new_spec(change: Change, entry: Entry | None, checked: ScheduleSpec | None) -> ScheduleSpec:
    if change.spec is None and entry is not None:
        return entry.spec  # an archive keeps the last spec
    return checked if checked is not None else _spec(change)


def _spec(change: Change) -> ScheduleSpec:
    # Writers validate first; this guards against a log written by other code.
    try:
        spec = ScheduleSpec.model_validate(change.spec)
    except ValidationError as error:
        raise InvalidSchedule(change.name, validation_problems(error)) from None
    if spec.name != change.name:
        raise InvalidSchedule(change.name, [f"name: the spec is named {spec.name!r}"])
    return spec
