"""Which fires are due: a heap of next-fire times, and the catch-up policy for late ones.

The heap holds one entry per schedule, its next fire, so a wake-up touches only the
schedules that are due. A fire is *missed* when it was not published within ``ON_TIME`` of
its time: no scheduler was leading, or the leader was held up. Of the fires due at a
wake-up, each schedule's ``catch_up`` keeps:

- ``all``: every fire within ``misfire_grace_seconds``;
- ``latest`` (default): the most recent fire within ``misfire_grace_seconds``;
- ``skip``: only a fire that is on time.

Every fire not kept is reported as skipped, with the reason. Only fires a schedule was owed
are due at all: none before its ``since`` (its creation, the change of its timing, or the
reload that added it to the file), however long ago the last wake-up was.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from warren_cron.schedules.load import ScheduleSet
from warren_cron.schedules.schedule import Schedule

#: A fire published this late is still on time; later, it counts as missed.
ON_TIME = timedelta(seconds=2)
#: Fires older than the grace window are listed one by one up to this many per schedule.
MAX_LISTED_SKIPS = 100
_TICK = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class Skipped:
    """A due fire that will not be published, and why."""

    schedule: Schedule
    fire: datetime
    reason: str


@dataclass(slots=True)
class Batch:
    """What one wake-up found: fires to publish in order, and fires skipped."""

    publish: list[tuple[datetime, Schedule]] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    #: Schedules that skipped more old fires than were listed, with the oldest kept time.
    unlisted: list[tuple[Schedule, datetime]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.publish or self.skipped or self.unlisted)


def keep(schedule: Schedule, fires: list[datetime], now: datetime) -> list[datetime]:
    """The fires, due at ``now``, that the schedule's catch-up policy publishes."""
    grace = timedelta(seconds=schedule.spec.misfire_grace_seconds)
    recent = [fire for fire in fires if now - schedule.due(fire) <= grace]
    if schedule.spec.catch_up == "all":
        return recent
    if schedule.spec.catch_up == "latest":
        return recent[-1:]
    return [fire for fire in recent if now - schedule.due(fire) <= ON_TIME]


def skip_reason(schedule: Schedule, fire: datetime, now: datetime) -> str:
    """Why a due fire that ``keep`` dropped is not published."""
    grace = schedule.spec.misfire_grace_seconds
    if (now - schedule.due(fire)).total_seconds() > grace:
        return f"missed by more than misfire_grace_seconds ({grace:g}s)"
    if schedule.spec.catch_up == "latest":
        return "catch_up = latest: a later fire is published instead"
    return "catch_up = skip: missed fires are not run"


def due_fires(
    schedule: Schedule, first: datetime, now: datetime
) -> tuple[list[datetime], datetime | None, datetime | None]:
    """Fires due from ``first`` up to ``now``, the first unlisted kept time, and the next fire."""
    horizon = now - timedelta(seconds=schedule.spec.misfire_grace_seconds)
    fires: list[datetime] = []
    unlisted: datetime | None = None
    fire: datetime | None = first
    while fire is not None and schedule.due(fire) <= now:
        if fire < horizon and len(fires) >= MAX_LISTED_SKIPS:
            # Too old to publish under any policy: jump to the grace window.
            unlisted = horizon
            fire = schedule.next_fire(horizon - _TICK)
            continue
        fires.append(fire)
        fire = schedule.next_fire(fire)
    return fires, unlisted, fire


def first_after(schedule: Schedule, after: datetime) -> datetime | None:
    """The schedule's first fire not yet due at ``after``: a jittered fire before ``after``
    may still wait for its delay (and the watermark covers only what was due)."""
    fire = schedule.next_fire(after - timedelta(milliseconds=schedule.jitter_ms))
    while fire is not None and schedule.due(fire) <= after:
        fire = schedule.next_fire(fire)
    return fire


def first_seen(old: ScheduleSet, new: ScheduleSet, now: datetime) -> ScheduleSet:
    """``new`` with each schedule that ``old`` lacked, or that fires otherwise there, owed from
    ``now``; the others keep the moment they had."""
    before = {s.name: s for s in old.schedules}
    marked: list[Schedule] = []
    for schedule in new.schedules:
        prior = before.get(schedule.name)
        if prior is None or prior.spec.timing_key() != schedule.spec.timing_key():
            marked.append(schedule.owed_from(now))
        else:
            marked.append(schedule.owed_from(prior.since))
    return ScheduleSet(new.source, tuple(marked))


class FireHeap:
    """Next fire of every enabled schedule, by when it is due (its time plus its jitter).

    A created, changed or removed schedule is taken in place (``put``): its new next fire is
    pushed and the entry it had is left in the heap, recognised as stale when it comes up
    (``_moved`` holds the next fire of each schedule changed since the heap was made), so a
    change costs a push, not a new heap of every schedule.
    """

    def __init__(
        self, schedules: ScheduleSet, after: datetime, floors: Mapping[str, datetime] | None = None
    ) -> None:
        """``after``: every fire due up to it was handled; ``floors``: a later such moment
        of some schedules (their last resume)."""
        self.schedules = schedules
        self._by_name = {s.name: s for s in schedules.schedules}
        self._heap: list[tuple[datetime, str, datetime]] = []
        #: The next fire of each schedule put since the heap was made (None: it has none).
        self._moved: dict[str, datetime | None] = {}
        floors = floors or {}
        for schedule in schedules.schedules:
            floor = floors.get(schedule.name)
            fire = first_after(schedule, after if floor is None else max(after, floor))
            if fire is not None:
                self._heap.append((schedule.due(fire), schedule.name, fire))
        heapq.heapify(self._heap)

    def get(self, name: str) -> Schedule | None:
        """The schedule called ``name``, as the heap fires it."""
        return self._by_name.get(name)

    def put(
        self, name: str, schedule: Schedule | None, after: datetime, floor: datetime | None
    ) -> None:
        """Take ``schedule`` (None: removed) in place of the one called ``name``: its first
        fire after ``after`` (or its ``floor``, a later resume) is its next."""
        if schedule is None:
            self._by_name.pop(name, None)
            self._moved[name] = None
            return
        self._by_name[name] = schedule
        fire = first_after(schedule, after if floor is None else max(after, floor))
        self._moved[name] = fire
        if fire is not None:
            heapq.heappush(self._heap, (schedule.due(fire), name, fire))

    def next_time(self, held: Collection[str] = ()) -> datetime | None:
        """When the earliest schedule not ``held`` (paused) fires next; None when none will."""
        while self._heap and not self._current(self._heap[0]):
            heapq.heappop(self._heap)
        if not held:
            return self._heap[0][0] if self._heap else None
        return min(
            (entry[0] for entry in self._heap if entry[1] not in held and self._current(entry)),
            default=None,
        )

    def pop_due(self, now: datetime) -> Batch:
        """Take every fire up to ``now``, apply catch-up, and queue each schedule's next."""
        batch = Batch()
        while self._heap and self._heap[0][0] <= now:
            entry = heapq.heappop(self._heap)
            if not self._current(entry):
                continue
            while self._heap and self._heap[0] == entry:
                heapq.heappop(self._heap)  # a change that kept its next fire pushed it again
            _, name, first = entry
            schedule = self._by_name[name]
            following = self._take(schedule, first, now, batch)
            if name in self._moved:
                self._moved[name] = following
            if following is not None:
                heapq.heappush(self._heap, (schedule.due(following), name, following))
        batch.publish.sort(key=lambda item: (item[0], item[1].name))
        return batch

    def _current(self, entry: tuple[datetime, str, datetime]) -> bool:
        # Whether ``entry`` is its schedule's next fire, not one a ``put`` replaced.
        due, name, fire = entry
        schedule = self._by_name.get(name)
        if schedule is None or self._moved.get(name, fire) != fire:
            return False
        return not schedule.jitter_ms or schedule.due(fire) == due

    @staticmethod
    def _take(schedule: Schedule, first: datetime, now: datetime, batch: Batch) -> datetime | None:
        following = schedule.next_fire(first)
        late = now - schedule.due(first)
        early = following is None or schedule.due(following) > now
        if early and late <= ON_TIME and late <= schedule.grace:
            # The common case, one fire and on time: every policy publishes it.
            batch.publish.append((first, schedule))
            return following
        fires, unlisted, following = due_fires(schedule, first, now)
        kept = keep(schedule, fires, now)
        batch.publish += [(fire, schedule) for fire in kept]
        batch.skipped += [
            Skipped(schedule, fire, skip_reason(schedule, fire, now))
            for fire in fires
            if fire not in kept
        ]
        if unlisted is not None:
            batch.unlisted.append((schedule, unlisted))
        return following
