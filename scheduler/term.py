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

from warren_cron.broker.connect import is_gone
from warren_cron.clock import utc_text
from warren_cron.errors import BROKER_TROUBLE
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.names import Names
from warren_cron.runtime.metrics import LEADING
from warren_cron.scheduler.firing import Batch, FireHeap
from warren_cron.scheduler.leader import LeaderLock, identity
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
from warren_cron.scheduler.skips import SkipReport
from warren_cron.scheduler.watermark import Watermark
from warren_cron.schedules.load import ScheduleSet

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


async def lead(owner: Leads, connection: AbstractConnection, lock: LeaderLock) -> None:
    """Publish fires until ``owner`` stops or ``lock`` is lost (``LeadershipLost``)."""
    log.info("leading", identity=identity(), queue=owner.names.leader_queue)
    history = HistoryPublisher(owner.names, owner.settings, "scheduler")
    pauses = PauseBook(owner.names, owner.wake, lock.lost)
    runtime = RuntimeSchedules(owner.settings, owner.names, owner.wake, lock.lost)
    term = Term(owner, history, pauses, runtime)
    loop = asyncio.create_task(term.fire_loop(connection))
    keep = asyncio.create_task(lock.keep())
    watch = asyncio.create_task(lock.lost.wait())
    try:
        await asyncio.wait({loop, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (keep, watch, loop):
            task.cancel()  # a loop still running is fenced: nothing more may be published
        await asyncio.gather(loop, keep, watch, return_exceptions=True)
        owner.leading.clear()
        LEADING.set(0)
        term.skips.close()  # before the history closes: the folds of pauses still lasting
        for part in (pauses, runtime, history):
            await closed_quietly(part.close())
    if loop.cancelled():
        raise LeadershipLost("the leader's connection closed or its lease ran out")
    if (error := loop.exception()) is not None and is_gone(connection):
        # A publish in flight when the connection dies fails with whatever aiormq hands it
        # (a RuntimeError, even a bare Exception): the connection says what happened.
        raise LeadershipLost(f"the leader's connection closed ({error!r})") from error
    loop.result()


async def closed_quietly(closing: Awaitable[None]) -> None:
    """Await a close that may fail: once the lease ran out the node may be cut off, and a
    channel's close then fails (aiormq cancels its call when the connection dies)."""
    try:
        await closing
    except BROKER_TROUBLE as error:
        log.debug("closed with the broker in trouble", error=repr(error))
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # this task is being cancelled: not the close's own failure


class Term:
    """The fire loop of one term, with the history, pauses and runtime schedules it uses."""

    def __init__(
        self,
        owner: Leads,
        history: HistoryPublisher,
        pauses: PauseBook,
        runtime: RuntimeSchedules,
    ) -> None:
        self.owner = owner
        self.history = history
        self.pauses = pauses
        self.runtime = runtime
        self.skips = SkipReport(history)

    async def fire_loop(self, connection: AbstractConnection) -> None:
        """Catch up from the watermark, then publish each due fire until stopped."""
        owner, runtime = self.owner, self.runtime
        await self.history.start(connection)
        publisher = FirePublisher(connection, owner.names, owner.settings, self.history)
        watermark = Watermark(await publisher.open(), owner.names, owner.settings.queue_type)
        await watermark.declare()
        # The cursor first: fires due while the pauses are read come late, but none is lost.
        cursor = await self._start_cursor(watermark)
        await self.pauses.start(connection)  # before the first fire: a paused schedule stays so
        await runtime.start(connection, cursor, owner.clock())
        heap = FireHeap(runtime.combined(owner.schedules), cursor, self.pauses.resumed)
        owner.leading.set()
        LEADING.set(1)
        while not owner.stopping.is_set():
            heap = self._current_heap(heap, cursor)
            now = max(owner.clock(), cursor)
            batch = heap.pop_due(now)
            self.pauses.shape(batch, now, cursor, heap)
            # Every wake-up, empty or not: a resumed schedule's fold closes at the next one.
            self.skips.report(batch, self.pauses.paused)
            if batch:
                if not await self._handle(batch, publisher):
                    return
                cursor = now
                await watermark.write(cursor)
                owner.handled_up_to = owner.last_fire_at = cursor
            # A paused schedule's fires still wake the loop (each is skipped, and counted),
            # but none is a next fire: it publishes nothing.
            owner.next_fire_at = heap.next_time(self.pauses.paused)
            await self._sleep_until(heap.next_time())

    def _current_heap(self, heap: FireHeap, cursor: datetime) -> FireHeap:
        # A reload makes a new heap; a runtime change is taken into this one in place.
        combined = self.runtime.combined(self.owner.schedules)
        if heap.schedules is not combined:
            return FireHeap(combined, cursor, self.pauses.resumed)
        for name, schedule in self.runtime.take_changes():
            heap.put(name, schedule, cursor, self.pauses.resumed.get(name))
        return heap

    async def _start_cursor(self, watermark: Watermark) -> datetime:
        stored = await watermark.read()
        now = self.owner.clock()
        if stored is None:
            log.info("no watermark: nothing to catch up", now=utc_text(now))
            stored = now
        else:
            behind = round((now - stored).total_seconds(), 3)
            log.info("catching up from the watermark", watermark=utc_text(stored), behind_s=behind)
        await watermark.write(stored)  # a fresh copy: reads never pile up on one message
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
