"""Create, update and archive runtime schedules: what ``warren schedules``, the HTTP API, the
dashboard's forms and the client all do.

Each write goes through the store's ``ScheduleAdmin`` (checked whole, appended, read back)
and returns the schedule as stored, or raises the store's error saying why not. Given a
history publisher (``audit_to``), the write is also told to the history stream as a
``changed`` event naming ``by``: the monitor's API and forms do so; the command and the
client leave it to the schedule's own history of changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from warren_cron.errors import StoreError
from warren_cron.history.events import event
from warren_cron.store.admin import ScheduleAdmin
from warren_cron.store.edits import SpecLike
from warren_cron.store.stored import StoredSchedule

if TYPE_CHECKING:
    # Only the monitor audits: the client and the command need not load the publisher.
    from warren_cron.history.publisher import HistoryPublisher


async def create_schedule(
    admin: ScheduleAdmin,
    spec: SpecLike,
    by: str,
    reason: str | None = None,
    *,
    audit_to: HistoryPublisher | None = None,
) -> StoredSchedule:
    """Create a runtime schedule, or again one that was archived; ``NameTaken`` if live."""
    return _audited(await admin.create(spec, by, reason), by, audit_to)


async def create_schedules(
    admin: ScheduleAdmin, specs: Iterable[SpecLike], by: str, reason: str | None = None
) -> list[StoredSchedule | StoreError]:
    """Create many runtime schedules, many writes in flight; each outcome in order."""
    return await admin.create_many(specs, by, reason)


async def update_schedule(
    admin: ScheduleAdmin,
    name: str,
    changes: Mapping[str, Any],
    version: int,
    by: str,
    reason: str | None = None,
    *,
    audit_to: HistoryPublisher | None = None,
) -> StoredSchedule:
    """Change fields of runtime schedule ``name``, based on ``version`` as read;
    ``VersionConflict`` when another change came first."""
    changed = await admin.update(name, changes, version, by, reason)
    return _audited(changed, by, audit_to)


async def archive_schedule(
    admin: ScheduleAdmin,
    name: str,
    version: int | None,
    by: str,
    reason: str | None = None,
    *,
    audit_to: HistoryPublisher | None = None,
) -> StoredSchedule:
    """Stop runtime schedule ``name`` for good, its history kept (given ``version``: only
    if it is current)."""
    return _audited(await admin.archive(name, version, by, reason), by, audit_to)


def audit(history: HistoryPublisher, stored: StoredSchedule, by: str) -> None:
    """Record the schedule's last change in the history stream, as made by ``by``."""
    change = stored.history[-1]
    history.emit(
        event(
            "changed",
            schedule=stored.name,
            by=by,
            change=change["kind"],
            version=stored.version,
            reason=change.get("reason"),
        )
    )


def _audited(stored: StoredSchedule, by: str, history: HistoryPublisher | None) -> StoredSchedule:
    if history is not None:
        audit(history, stored, by)
    return stored
