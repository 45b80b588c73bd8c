"""The scheduler process: stand by, lead, publish due fires, keep the watermark, reload.

::

    run ─┬─ watch the schedules file (mtime) ── reload()
         └─ campaign: connect ─ stand by until the leader queue is ours ─ lead
                       ▲                                                  │
                       └──────── connection lost: no longer leader ◀──────┘

    lead: read the watermark ─ read the pauses and the runtime schedules (then follow both
          live) ─ heap of next fires (file and runtime) after the watermark ─ loop: sleep
          (monotonic) until the next fire, a change, a reload, a resume --catch-up, or stop
          ─ pop due fires ─ catch-up policy ─ skip paused schedules ─ publish each,
          confirmed ─ write the watermark
    history: fired and skipped events, sent in the background (topology/history/)
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import structlog
from aio_pika.abc import AbstractConnection

from warren_cron.clock import utc_text, utcnow
from warren_cron.errors import ScheduleError, TopologyError
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.names import Names
from warren_cron.runtime.metrics import LEADING
from warren_cron.scheduler.beat import beating
from warren_cron.scheduler.firing import Batch, FireHeap
from warren_cron.scheduler.leader import identity, open_connection, try_lead, watch_connection
from warren_cron.scheduler.pauses import PauseBook
from warren_cron.scheduler.publisher import (
    PUBLISH_ERRORS,
    Fire,
    FirePublisher,
    LeadershipLost,
    backoff,
    wait_for_event,
)
from warren_cron.scheduler.runtime import RuntimeSchedules
from warren_cron.scheduler.settings import SchedulerSettings
from warren_cron.scheduler.skips import report_skipped
from warren_cron.scheduler.watermark import Watermark
from warren_cron.schedules.load import ScheduleSet, load_schedules

log = structlog.get_logger("scheduler")
#: Longest sleep between looks at the wall clock, so a clock step is noticed.
MAX_SLEEP_SECONDS = 30.0
Clock = Callable[[], datetime]


def file_stamp(path: Path) -> tuple[int, int] | None:
    """Modification time and size of the schedules file, None if it cannot be read."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


class Scheduler:
    """Publishes each schedule's fires while it is the leader; stands by otherwise."""

    def __init__(
        self, settings: SchedulerSettings, schedules: ScheduleSet, clock: Clock = utcnow
    ) -> None:
        self.settings = settings
        self.names = Names(settings.namespace)
        self.schedules = schedules
        #: Set while this scheduler leads and publishes.
        self.leading = asyncio.Event()
        #: The last watermark this scheduler wrote: every fire up to it is handled.
        self.handled_up_to: datetime | None = None
        #: When fires were last published, and the next one due: what the heartbeat says.
        self.last_fire_at: datetime | None = None
        self.next_fire_at: datetime | None = None
        self._clock = clock
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._stamp = file_stamp(settings.schedules_file)
        #: The connection campaigning or leading now; None while reconnecting.
        self.connection: AbstractConnection | None = None
        self._sessions = 0  # connections opened so far
        #: Called after every successful reload (the process freezes the new set for the GC).
        self.on_reload: Callable[[], None] | None = None

    def connected(self) -> bool:
        """True while the scheduler holds a live broker connection (leading or standing by)."""
        return self.connection is not None and not self.connection.is_closed

    def stop(self) -> None:
        """Stop after the fires being published now are confirmed."""
        self._stop.set()
        self._wake.set()

    def reload(self) -> bool:
        """Load the schedules file again; an invalid file is logged and the old set kept."""
        self._stamp = file_stamp(self.settings.schedules_file)
        try:
            schedules = load_schedules(self.settings.schedules_file, self.settings)
        except ScheduleError as error:
            _log_rejected(error)
            return False
        self.schedules = schedules
        if self.on_reload is not None:
            self.on_reload()
        self._wake.set()
        log.info("schedules reloaded", file=schedules.source, count=len(schedules.schedules))
        return True

    async def run(self) -> None:
        """Run until ``stop()``: watch the file and campaign for leadership."""
        log.info(
            "scheduler started",
            identity=identity(),
            schedules=_some_names(self.schedules),
            count=len(self.schedules.schedules),
            broker=self.settings.safe_url,
        )
        watcher = asyncio.create_task(self._watch_file())
        try:
            await self._campaign()
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
        log.info("scheduler stopped")

    async def _watch_file(self) -> None:
        poll = self.settings.schedules_poll_seconds
        while poll > 0:
            await asyncio.sleep(poll)
            if file_stamp(self.settings.schedules_file) != self._stamp:
                self.reload()

    async def _campaign(self) -> None:
        retry = self.settings.leader_retry_seconds
        reported = -1  # the session count when the broker was last reported missing
        while not self._stop.is_set():
            try:
                await self._session()
            except TopologyError:
                raise
            except PUBLISH_ERRORS as error:
                _log_unreachable(error, retry, again=reported == self._sessions)
                reported = self._sessions
            self.leading.clear()
            LEADING.set(0)
            await wait_for_event(self._stop, retry)

    async def _session(self) -> None:
        connection = await open_connection(self.settings)
        self.connection = connection
        self._sessions += 1
        try:
            interval = self.settings.scheduler_beat_seconds
            async with beating(connection, self.names, self, interval):
                if await self._stand_by(connection):
                    await self._lead(connection)
        finally:
            self.connection = None
            await connection.close()  # frees the leader queue at once

    async def _stand_by(self, connection: AbstractConnection) -> bool:
        announced = False
        while not self._stop.is_set():
            if await try_lead(connection, self.names):
                return True
            if not announced:
                log.info("standing by: another scheduler leads", queue=self.names.leader_queue)
                announced = True
            await wait_for_event(self._stop, self.settings.leader_retry_seconds)
        return False

    async def _lead(self, connection: AbstractConnection) -> None:
        lost = watch_connection(connection)
        log.info("leading", identity=identity(), queue=self.names.leader_queue)
        history = HistoryPublisher(self.names, self.settings, "scheduler")
        pauses = PauseBook(self.names, self._wake, lost)
        runtime = RuntimeSchedules(self.settings, self.names, self._wake, lost)
        loop = asyncio.create_task(self._fire_loop(connection, history, pauses, runtime))
        watch = asyncio.create_task(lost.wait())
        try:
            await asyncio.wait({loop, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not loop.done():
                # Fenced: nothing more may be published once the connection is gone.
                loop.cancel()
            await asyncio.gather(loop, watch, return_exceptions=True)
            self.leading.clear()
            LEADING.set(0)
            await pauses.close()
            await runtime.close()
            await history.close()
        if loop.cancelled():
            raise LeadershipLost("the leader's connection closed")
        loop.result()

    async def _fire_loop(
        self,
        connection: AbstractConnection,
        history: HistoryPublisher,
        pauses: PauseBook,
        runtime: RuntimeSchedules,
    ) -> None:
        await history.start(connection)
        publisher = FirePublisher(connection, self.names, self.settings, history)
        watermark = Watermark(await publisher.open(), self.names, self.settings.queue_type)
        await watermark.declare()
        # The cursor first: fires due while the pauses are read come late, but none is lost.
        cursor = await self._start_cursor(watermark)
        await pauses.start(connection)  # before the first fire: a paused schedule stays so
        await runtime.start(connection)
        heap = FireHeap(runtime.combined(self.schedules), cursor)
        self.leading.set()
        LEADING.set(1)
        while not self._stop.is_set():
            if heap.schedules is not runtime.combined(self.schedules):
                heap = FireHeap(runtime.combined(self.schedules), cursor)
            now = max(self._clock(), cursor)
            batch = heap.pop_due(now)
            pauses.shape(batch, now, cursor, heap.schedules)
            if batch:
                if not await self._handle(batch, publisher, history):
                    return
                cursor = now
                await watermark.write(cursor)
                self.handled_up_to = self.last_fire_at = cursor
            self.next_fire_at = heap.next_time()
            await self._sleep_until(self.next_fire_at)

    async def _start_cursor(self, watermark: Watermark) -> datetime:
        stored = await watermark.read()
        now = self._clock()
        if stored is None:
            log.info("no watermark: nothing to catch up", now=utc_text(now))
            stored = now
        else:
            behind = round((now - stored).total_seconds(), 3)
            log.info("catching up from the watermark", watermark=utc_text(stored), behind_s=behind)
        await watermark.write(stored)  # a fresh copy: reads never pile up on one message
        self.handled_up_to = stored
        return stored

    async def _handle(
        self, batch: Batch, publisher: FirePublisher, history: HistoryPublisher
    ) -> bool:
        report_skipped(batch, history)
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
            if failed and await wait_for_event(self._stop, backoff(max(tries.values()))):
                return False
        return True

    async def _sleep_until(self, target: datetime | None) -> None:
        seconds = MAX_SLEEP_SECONDS
        if target is not None:
            seconds = min(max((target - self._clock()).total_seconds(), 0.0), seconds)
        await wait_for_event(self._wake, seconds)
        self._wake.clear()


def _some_names(schedules: ScheduleSet, shown: int = 20) -> list[str]:
    # A file of 100,000 schedules would make a log line of a megabyte.
    names = [s.name for s in schedules.schedules[:shown]]
    if len(schedules.schedules) > shown:
        names.append(f"... and {len(schedules.schedules) - shown} more")
    return names


def _log_unreachable(error: BaseException, retry: float, again: bool) -> None:
    # Once per outage: the tries after it, every few seconds while it lasts, are DEBUG lines.
    getattr(log, "debug" if again else "warning")(
        "not leading: cannot reach the broker or lost the connection; trying again",
        error=f"{type(error).__name__}: {error}",
        retry_in_s=retry,
    )


def _log_rejected(error: ScheduleError) -> None:
    log.error(
        "schedules not reloaded: the file is invalid; the previous schedules keep running",
        file=error.source,
        problems=error.problems,
    )
