"""What a follower of the cancels stream knows: the tombstones still alive, by run and by
schedule, each forgotten once its ``until`` passed."""

from __future__ import annotations

from datetime import datetime, timedelta

from warren_cron.cancel.tombstone import Tombstone

#: How often expired tombstones are dropped: a pass looks at every one kept.
PRUNE_EVERY = timedelta(minutes=1)


class CancelBook:
    """The live tombstones; ``stopping`` is one dict lookup per task (two with schedule
    tombstones alive), as it runs before every attempt."""

    def __init__(self) -> None:
        self._runs: dict[str, Tombstone] = {}
        self._schedules: dict[str, Tombstone] = {}
        self._pruned: datetime | None = None

    def __len__(self) -> int:
        return len(self._runs) + len(self._schedules)

    def add(self, tombstone: Tombstone, now: datetime) -> bool:
        """Keep ``tombstone`` unless its time is past; True when it was kept."""
        self._prune(now)
        if tombstone.until <= now:
            return False
        if tombstone.run_id is not None:
            self._runs[tombstone.run_id] = _later(self._runs.get(tombstone.run_id), tombstone)
        elif tombstone.schedule is not None:
            kept = self._schedules.get(tombstone.schedule)
            self._schedules[tombstone.schedule] = _latest_before(kept, tombstone)
        return True

    def stopping(
        self, run_id: str, schedule: str | None, scheduled_for: datetime
    ) -> Tombstone | None:
        """The tombstone that cancels this run, if one does."""
        found = self._runs.get(run_id)
        if found is not None or schedule is None or not self._schedules:
            return found
        wide = self._schedules.get(schedule)
        if wide is not None and wide.before is not None and scheduled_for <= wide.before:
            return wide
        return None

    def _prune(self, now: datetime) -> None:
        if self._pruned is not None and now - self._pruned < PRUNE_EVERY:
            return
        self._pruned = now
        for kept in (self._runs, self._schedules):
            for key in [key for key, tomb in kept.items() if tomb.until <= now]:
                del kept[key]


def _later(kept: Tombstone | None, new: Tombstone) -> Tombstone:
    """Of two cancels of one run, the one kept longer (the first one's words otherwise)."""
    return new if kept is None or new.until > kept.until else kept


def _latest_before(kept: Tombstone | None, new: Tombstone) -> Tombstone:
    """Of two archives of one schedule, the later one: it covers the earlier one's fires."""
    assert new.before is not None
    if kept is None or kept.before is None or new.before >= kept.before:
        return new
    return kept
