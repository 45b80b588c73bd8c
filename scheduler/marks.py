"""What a term holds of its partitions: their watermarks and their schedules in the heap.

Each partition keeps its own watermark (``<ns>_scheduler.watermark.<p>``, the one
``<ns>_scheduler.watermark`` with one partition): every fire of the partition's schedules up
to it is handled. A partition won is read from its watermark, and its schedules enter the
heap from there, whatever the term's cursor: so a move neither loses a fire (the new leader
catches up from the old one's watermark) nor doubles one (nothing up to it fires again). A
partition is written after each batch that fired or skipped one of its schedules, and once
more before it is given up, at the moment it was handled up to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime

import structlog
from aio_pika.abc import AbstractChannel

from warren_cron.clock import utc_text
from warren_cron.names import Names
from warren_cron.scheduler.firing import Batch, FireHeap
from warren_cron.scheduler.settings import SchedulerSettings
from warren_cron.scheduler.shares import partition_of
from warren_cron.scheduler.watermark import Watermark
from warren_cron.schedules.load import ScheduleSet
from warren_cron.schedules.schedule import Schedule
from warren_cron.schedules.timing import EPOCH

log = structlog.get_logger("scheduler")
#: Schedules a partition's move goes over between two turns of the event loop.
TAKE_CHUNK = 5_000


class Marks:
    """The watermarks of the partitions a term leads."""

    def __init__(self, channel: AbstractChannel, names: Names, settings: SchedulerSettings) -> None:
        self.count = settings.scheduler_partitions
        #: Every fire of each held partition up to this moment is handled (published,
        #: skipped, or in the batch under way): its watermark when won, then each wake-up's.
        self.handled: dict[int, datetime] = {}
        self._channel = channel
        self._names = names
        self._type = settings.queue_type
        self._stores: dict[int, Watermark] = {}

    def store(self, partition: int) -> Watermark:
        """The watermark queue of ``partition`` (one object each: a batch writes a few)."""
        store = self._stores.get(partition)
        if store is None:
            queue = self._names.partition_watermark_queue(partition, self.count)
            store = self._stores[partition] = Watermark(
                self._channel, self._names, self._type, queue
            )
        return store

    async def take(self, partitions: Collection[int], now: datetime) -> dict[int, datetime]:
        """Read each partition's watermark (``now`` when it has none) and write it back."""
        read = await asyncio.gather(*(self._take(p, now) for p in partitions))
        taken = dict(zip(partitions, read, strict=True))
        self.handled.update(taken)
        return taken

    def advance(self, moment: datetime) -> None:
        """Every fire of every held partition up to ``moment`` was taken from the heap."""
        for partition, handled in self.handled.items():
            if handled < moment:
                self.handled[partition] = moment

    async def write(self, partitions: Iterable[int], moment: datetime) -> None:
        """Store ``moment`` as the watermark of each of ``partitions``, confirmed."""
        stores = [self.store(p) for p in partitions]
        if len(stores) == 1:
            await stores[0].write(moment)  # the common case, without a task per write
        else:
            await asyncio.gather(*(store.write(moment) for store in stores))

    async def give_up(self, partitions: Iterable[int]) -> None:
        """Write each partition's watermark where it was handled up to, and forget it."""
        handled = {p: self.handled.pop(p) for p in set(partitions)}
        await asyncio.gather(*(self.store(p).write(moment) for p, moment in handled.items()))

    async def _take(self, partition: int, now: datetime) -> datetime:
        store = self.store(partition)
        await store.declare()
        stored = await store.read()
        if stored is None and self.count > 1:
            # Partitions newly set on a namespace led by one scheduler: its watermark holds.
            legacy = Watermark(self._channel, self._names, self._type)
            await legacy.declare()
            stored = await legacy.read()
        if stored is None:
            log.info("no watermark: nothing to catch up", partition=partition, now=utc_text(now))
            stored = now
        else:
            behind = round((now - stored).total_seconds(), 3)
            log.info(
                "catching up from the watermark",
                partition=partition,
                watermark=utc_text(stored),
                behind_s=behind,
            )
        await store.write(stored)  # a fresh copy: reads never pile up on one message
        return stored


class Floors(Mapping[str, datetime]):
    """Each schedule's floor in a new heap: its last resume, or its partition's watermark
    when that is later (a partition won from a leader whose clock ran ahead)."""

    def __init__(self, resumed: Mapping[str, datetime], marks: Marks) -> None:
        self._resumed = resumed
        self._marks = marks

    def __getitem__(self, name: str) -> datetime:
        start = self._marks.handled.get(partition_of(name, self._marks.count))
        resumed = self._resumed.get(name)
        if start is None or resumed is None:
            floor = start or resumed
            if floor is None:
                raise KeyError(name)
            return floor
        return max(start, resumed)

    def __iter__(self) -> Iterator[str]:
        return iter(self._resumed)

    def __len__(self) -> int:
        return len(self._resumed) + len(self._marks.handled)


def held(schedules: ScheduleSet, partitions: Collection[int], count: int) -> ScheduleSet:
    """The schedules of ``partitions`` (all of them with one partition)."""
    if count == 1:
        return schedules
    return ScheduleSet(
        schedules.source, tuple(of_partitions(schedules.schedules, partitions, count))
    )


def of_partitions(
    schedules: Iterable[Schedule], partitions: Collection[int], count: int
) -> Iterator[Schedule]:
    """Each schedule of ``partitions``."""
    return (s for s in schedules if partition_of(s.name, count) in partitions)


def touched(batch: Batch, count: int) -> set[int]:
    """The partitions whose schedules the batch fired or skipped."""
    if count == 1:
        return {0} if batch else set()
    names = [s.name for _, s in batch.publish] + [s.schedule.name for s in batch.skipped]
    names += [s.name for s, _ in batch.unlisted]
    return {partition_of(name, count) for name in names}


async def take_in(
    heap: FireHeap,
    schedules: Sequence[Schedule],
    marks: Marks,
    taken: Mapping[int, datetime],
    resumed: Mapping[str, datetime],
) -> None:
    """Put the schedules of partitions just won into ``heap``, each from its watermark."""
    for chunk in _chunks(schedules):
        for schedule in chunk:
            after = taken.get(partition_of(schedule.name, marks.count))
            if after is not None:
                heap.put(schedule.name, schedule, after, resumed.get(schedule.name))
        await asyncio.sleep(0)


async def let_go(
    heap: FireHeap, schedules: Sequence[Schedule], partitions: Collection[int], count: int
) -> None:
    """Take the schedules of ``partitions`` out of ``heap``: none of their fires is due here."""
    for chunk in _chunks(schedules):
        for schedule in of_partitions(chunk, partitions, count):
            heap.put(schedule.name, None, EPOCH, None)  # a removal reads no moment
        await asyncio.sleep(0)


def _chunks(schedules: Sequence[Schedule]) -> Iterator[Sequence[Schedule]]:
    # A move goes over every schedule held, TAKE_CHUNK between two turns of the loop: 300,000
    # taken in at once held it for 7.7 s, past the beats and the probes of the leases.
    for start in range(0, len(schedules), TAKE_CHUNK):
        yield schedules[start : start + TAKE_CHUNK]
