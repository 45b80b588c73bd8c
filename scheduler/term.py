"""One term of leadership: from winning the lock to losing it or stopping.

::

    read the watermark ─ read the pauses and the runtime schedules (then follow both live)
    ─ heap of next fires (file and runtime) after the watermark ─ loop: sleep (monotonic)
    until the next fire, a change, a reload, a resume --catch-up, or stop ─ pop due fires
    ─ catch-up policy ─ skip paused schedules ─ publish each, confirmed ─ write the watermark

The term ends at once when the lock is lost (its connection closed or its lease ran out):
the fire loop is cancelled, so nothing more is published by a scheduler that may no longer
lead. The process (``scheduler/service.py``) then campaigns again.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Protocol

import structlog
from aio_pika.abc import AbstractConnection

from warren_cron.errors import BROKER_TROUBLE, being_cancelled
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.names import Names
from warren_cron.runtime.metrics import LEADING
from warren_cron.scheduler.firing import Batch, FireHeap
from warren_cron.scheduler.leader import identity
from warren_cron.scheduler.leases import Leases
from warren_cron.scheduler.marks import Floors, Marks, held, let_go, take_in, touched
from warren_cron.scheduler.pauses import PauseBook
from warren_cron.scheduler.publisher import (
    Fire,
    FirePublisher,
    LeadershipLost,
    backoff,
    wait_for_event,
)
from warren_cron.scheduler.runtime import RuntimeSchedules
from warren_cron.scheduler.settings import SchedulerSettings
from warren_cron.scheduler.shares import partition_of
from warren_cron.scheduler.skips import SkipReport
from warren_cron.schedules.load import ScheduleSet
from warren_cron.schedules.timing import EPOCH

log = structlog.get_logger("scheduler")
#: Longest sleep between looks at the wall clock, so a clock step is noticed.
MAX_SLEEP_SECONDS = 30.0


class Leads(Protocol):
    """What a term reads from and reports to its scheduler."""

    settings: SchedulerSettings
    names: Names
    schedules: ScheduleSet
    leading: asyncio.Event
    handled_up_to: datetime | None
    last_fire_at: datetime | None
    next_fire_at: datetime | None
    stopping: asyncio.Event
    wake: asyncio.Event
    clock: Callable[[], datetime]
    partitions: tuple[int, ...]
    #: The runtime schedules, kept from one term to the next.
    runtime: RuntimeSchedules


async def lead(owner: Leads, connection: AbstractConnection, leases: Leases) -> None:
    """Publish fires until ``owner`` stops or a lease is lost (``LeadershipLost``)."""
    log.info("leading", identity=identity(), queue=leases.queue(min(leases.led, default=0)))
    history = HistoryPublisher(owner.names, owner.settings, "scheduler")
    pauses = PauseBook(owner.names, owner.wake, leases.lost)
    runtime = owner.runtime
    term = Term(owner, history, pauses, runtime, leases)
    loop = asyncio.create_task(term.fire_loop(connection))
    watch = asyncio.create_task(leases.lost.wait())
    try:
        await asyncio.wait({loop, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (watch, loop):
            task.cancel()  # a loop still running is fenced: nothing more may be published
        await asyncio.gather(loop, watch, return_exceptions=True)
        owner.leading.clear()
        owner.partitions = ()
        LEADING.set(0)
        term.skips.close()  # before the history closes: the folds of pauses still lasting
        for part in (pauses, runtime, history):
            await closed_quietly(part.close())
    if loop.cancelled():
        raise LeadershipLost("the leader's connection closed or its lease ran out")
    # A publish in flight when the connection dies fails with whatever aiormq hands it (a
    # RuntimeError, even a bare Exception): the session (scheduler/service.py) reads the
    # connection and calls that a lost leadership.
    loop.result()


async def closed_quietly(closing: Awaitable[None]) -> None:
    """Await a close that may fail: once the lease ran out the node may be cut off, and a
    channel's close then fails (aiormq cancels its call when the connection dies)."""
    try:
        await closing
    except BROKER_TROUBLE as error:
        log.debug("closed with the broker in trouble", error=repr(error))
    except asyncio.CancelledError:
        if being_cancelled():
            raise  # this task is being cancelled: not the close's own failure


class Term:
    """The fire loop of one term, with the history, pauses and runtime schedules it uses."""

    def __init__(
        self,
        owner: Leads,
        history: HistoryPublisher,
        pauses: PauseBook,
        runtime: RuntimeSchedules,
        leases: Leases,
    ) -> None:
        self.owner = owner
        self.history = history
        self.pauses = pauses
        self.runtime = runtime
        self.leases = leases
        self.skips = SkipReport(history)
        self.count = leases.count
        #: The partitions whose schedules are in the heap.
        self.held: set[int] = set()
        self._combined: ScheduleSet | None = None

    async def fire_loop(self, connection: AbstractConnection) -> None:
        """Catch up from the watermarks, then publish each due fire until stopped."""
        owner, runtime = self.owner, self.runtime
        await self.history.start(connection)
        publisher = FirePublisher(connection, owner.names, owner.settings, self.history)
        self.marks = Marks(await publisher.open(), owner.names, owner.settings)
        # The cursor first: fires due while the pauses are read come late, but none is lost.
        cursor = await self._start_cursor()
        await self.pauses.start(connection)  # before the first fire: a paused schedule stays so
        floor = cursor if self.count == 1 else EPOCH  # partitions won later start earlier
        await runtime.start(connection, floor, owner.clock(), self.leases.lost)
        heap = self._new_heap(cursor)
        owner.leading.set()
        LEADING.set(1)
        while not owner.stopping.is_set():
            heap = await self._moves(self._current_heap(heap, cursor))
            now = max(owner.clock(), cursor)
            batch = heap.pop_due(now)
            self.marks.advance(now)
            self.pauses.shape(batch, now, cursor, heap)
            # Every wake-up, empty or not: a resumed schedule's fold closes at the next one.
            self.skips.report(batch, self.pauses.paused)
            if batch:
                if not await self._handle(batch, publisher):
                    return
                await self.marks.write(touched(batch, self.count), now)
                owner.handled_up_to = owner.last_fire_at = now
            cursor = now  # every fire up to it was popped: handled, or in the batch above
            # A paused schedule's fires still wake the loop (each is skipped, and counted),
            # but none is a next fire: it publishes nothing.
            owner.next_fire_at = heap.next_time(self.pauses.paused)
            await self._sleep_until(heap.next_time())

    def _new_heap(self, cursor: datetime) -> FireHeap:
        self.runtime.file_sync.enable(0 in self.held)  # one applier: partition 0's leader
        combined = self._combined = self.runtime.combined(self.owner.schedules)
        mine = held(combined, self.held, self.count)
        if self.count == 1:  # the cursor is past the one watermark: the resumes are the floors
            return FireHeap(mine, cursor, self.pauses.resumed)
        return FireHeap(mine, cursor, Floors(self.pauses.resumed, self.marks))

    def _current_heap(self, heap: FireHeap, cursor: datetime) -> FireHeap:
        # A reload makes a new heap; a runtime change is taken into this one in place.
        if self.runtime.combined(self.owner.schedules) is not self._combined:
            return self._new_heap(cursor)
        for name, schedule in self.runtime.take_changes():
            partition = partition_of(name, self.count)
            if partition in self.held:
                after = max(cursor, self.marks.handled[partition])
                heap.put(name, schedule, after, self.pauses.resumed.get(name))
        return heap

    async def _moves(self, heap: FireHeap) -> FireHeap:
        # Partitions won are taken in from their watermarks; those to give up leave the heap,
        # their watermarks written where each was handled up to, before they go.
        if gained := [p for p in self.leases.take_gained() if p not in self.held]:
            taken = await self.marks.take(gained, self.owner.clock())
            self.held.update(gained)
            running = list(self.runtime.running())  # a change meanwhile comes after it
            await take_in(heap, running, self.marks, taken, self.pauses.resumed)
            self._show()
        if giving := [p for p in self.leases.take_giving() if p in self.held]:
            await let_go(heap, list(self.runtime.running()), giving, self.count)
            self.held.difference_update(giving)
            await self.marks.give_up(giving)  # a partition won this turn: its own watermark
            await self.leases.give_up(giving)
            self._show()
        return heap

    def _show(self) -> None:
        self.owner.partitions = tuple(sorted(self.held))
        self.runtime.file_sync.enable(0 in self.held)
        if self.count > 1:
            log.info("leading partitions", partitions=self.owner.partitions, of=self.count)

    async def _start_cursor(self) -> datetime:
        gained = self.leases.take_gained()
        taken = await self.marks.take(gained, self.owner.clock())
        self.held.update(gained)
        self._show()
        stored = min(taken.values())
        self.owner.handled_up_to = stored
        return stored

    async def _handle(self, batch: Batch, publisher: FirePublisher) -> bool:
        if not await self._publish_all(batch.publish, publisher):
            log.warning("stopped before every due fire was confirmed; the next leader has them")
            return False
        return True

    async def _publish_all(self, fires: list[Fire], publisher: FirePublisher) -> bool:
        # Waves: the oldest unconfirmed fire of every schedule goes out together, in batches
        # with many confirms in flight, so a schedule's fires stay in order. What was not
        # confirmed goes again with the next wave after a backoff; a lost connection raises.
        chains: dict[str, deque[Fire]] = {}
        for fire, schedule in fires:
            chains.setdefault(schedule.name, deque()).append((fire, schedule))
        tries: dict[str, int] = {}  # failed publishes of each schedule's oldest fire
        while chains:
            heads = [chain[0] for chain in chains.values()]
            failed = {s.name for _, s in await publisher.publish_many(heads, tries)}
            for name in list(chains):
                if name in failed:
                    tries[name] = tries.get(name, 0) + 1
                    continue
                tries.pop(name, None)
                chains[name].popleft()
                if not chains[name]:
                    del chains[name]
            if failed and await wait_for_event(self.owner.stopping, backoff(max(tries.values()))):
                return False
        return True

    async def _sleep_until(self, target: datetime | None) -> None:
        seconds = MAX_SLEEP_SECONDS
        if target is not None:
            seconds = min(max((target - self.owner.clock()).total_seconds(), 0.0), seconds)
        await wait_for_event(self.owner.wake, seconds)
        self.owner.wake.clear()
