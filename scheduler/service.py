"""The scheduler process: stand by, lead, publish due fires, keep the watermark, reload.

::

    run ─┬─ watch the schedules file (mtime) ── reload()
         └─ campaign: connect ─ probe the leader queue until this one is its active
                       consumer (scheduler/leader.py) ─ lead a term (scheduler/term.py)
                       ▲                                                  │
                       └──── connection lost or lease ran out: no longer leader ◀──┘

    history: fired and skipped events, sent in the background (topology/history/)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import structlog
from aio_pika.abc import AbstractConnection

from warren_cron.background import beside
from warren_cron.broker.connect import is_gone
from warren_cron.clock import utcnow
from warren_cron.errors import ScheduleError, TopologyError, being_cancelled
from warren_cron.names import Names
from warren_cron.runtime.metrics import LEADING
from warren_cron.scheduler.beat import beating
from warren_cron.scheduler.firing import first_seen
from warren_cron.scheduler.leader import first_of, identity, lease_seconds, open_connection
from warren_cron.scheduler.leases import Leases, spreading
from warren_cron.scheduler.publisher import PUBLISH_ERRORS, LeadershipLost, wait_for_event
from warren_cron.scheduler.runtime import RuntimeSchedules
from warren_cron.scheduler.settings import SchedulerSettings
from warren_cron.scheduler.shares import agreed
from warren_cron.scheduler.term import closed_quietly, lead
from warren_cron.schedules.load import ScheduleSet, load_schedules

log = structlog.get_logger("scheduler")
Clock = Callable[[], datetime]
#: How long a new session may take to read the beats and consume every partition's lock.
OPEN_SECONDS = 30.0


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
        self.clock = clock
        self.stopping = asyncio.Event()
        self.wake = asyncio.Event()
        self._stamp = file_stamp(settings.schedules_file)
        #: The connection campaigning or leading now; None while reconnecting.
        self.connection: AbstractConnection | None = None
        self._sessions = 0  # connections opened so far
        #: The partitions this scheduler leads, of how many (its beats say so).
        self.partitions: tuple[int, ...] = ()
        self.partition_count = settings.scheduler_partitions
        #: The runtime schedules: read on the first lead, caught up on the next ones.
        self.runtime = RuntimeSchedules(settings, self.names, self.wake)
        #: Called after every successful reload (the process freezes the new set for the GC).
        self.on_reload: Callable[[], None] | None = None

    def connected(self) -> bool:
        """True while the scheduler holds a live broker connection (leading or standing by)."""
        return self.connection is not None and not self.connection.is_closed

    def stop(self) -> None:
        """Stop after the fires being published now are confirmed."""
        self.stopping.set()
        self.wake.set()

    def reload(self) -> bool:
        """Load the schedules file again; an invalid file is logged and the old set kept."""
        self._stamp = file_stamp(self.settings.schedules_file)
        if self._stamp is None and not self.schedules.schedules:
            # Still no file, and none was run: nothing to reload (the store's schedules run).
            log.info("schedules not reloaded: still no schedules file", file=self.schedules.source)
            return False
        try:
            schedules = load_schedules(self.settings.schedules_file, self.settings).compact()
        except ScheduleError as error:
            _log_rejected(error)
            return False
        # Added or retimed now: no fire from before this reload is owed (the leader's apply
        # records the moment in the store, for the next leader).
        self.schedules = first_seen(self.schedules, schedules, self.clock())
        if self.on_reload is not None:
            self.on_reload()
        self.wake.set()
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
        async with beside(self._watch_file()):
            await self._campaign()
        log.info("scheduler stopped")

    async def _watch_file(self) -> None:
        poll = self.settings.schedules_poll_seconds
        while poll > 0:
            await asyncio.sleep(poll)
            if file_stamp(self.settings.schedules_file) != self._stamp:
                self._reload_watched()

    def _reload_watched(self) -> None:
        """``reload``, which must not end the watch: an error nobody foresaw is logged, the
        previous schedules run on, and the next edit is read again."""
        try:
            self.reload()
        except Exception as error:  # logged with its traceback: the poller must live on
            log.exception(
                "schedules not reloaded: the file could not be read; the previous schedules "
                "keep running, and the next change of the file is read again",
                file=str(self.settings.schedules_file),
                error=f"{type(error).__name__}: {error}",
            )

    async def _campaign(self) -> None:
        retry = self.settings.leader_retry_seconds
        reported = -1  # the session count when the broker was last reported missing
        while not self.stopping.is_set():
            try:
                await self._session()
            except TopologyError:
                raise
            except PUBLISH_ERRORS as error:
                _log_unreachable(error, retry, again=reported == self._sessions)
                reported = self._sessions
            self.leading.clear()
            LEADING.set(0)
            await wait_for_event(self.stopping, retry)

    async def _session(self) -> None:
        connection = await open_connection(self.settings)
        self.connection = connection
        self._sessions += 1
        leases = Leases(
            connection, self.names, lease_seconds(self.settings), self.partition_count, self.wake
        )
        try:
            interval = self.settings.scheduler_beat_seconds
            async with beating(connection, self.names, self, interval), spreading(leases):
                if await self._stand_by(connection, leases):
                    await lead(self, connection, leases)
                    if self.stopping.is_set():  # the fire loop ended: a standby may lead now
                        await leases.release()
        except (Exception, asyncio.CancelledError) as error:
            if not _died_under(error, connection):
                raise
            raise LeadershipLost(f"the scheduler's connection closed ({error!r})") from error
        finally:
            self.connection = None
            await leases.close()
            # The queue makes the next consumer active at once.
            await closed_quietly(connection.close())

    async def _stand_by(self, connection: AbstractConnection, leases: Leases) -> bool:
        retry = self.settings.leader_retry_seconds
        announced = False
        # An older scheduler's exclusive lock of the same name, or leaders split otherwise.
        while not await self._opened(connection, leases):
            if not announced:
                log.info("standing by: another scheduler leads", queue=self.names.leader_queue)
                announced = True
            if await wait_for_event(self.stopping, retry):
                return False
        leases.campaign(min(retry, leases.lease / 4), self.stopping)
        if leases.count > 1:  # a standby of partitions says nothing else until it wins one
            log.info("probing for the partitions", of=leases.count, identity=identity())
        await first_of(leases.changed, self.stopping, leases.lost, seconds=None)
        if leases.led:
            return True
        if not self.stopping.is_set():
            raise LeadershipLost("the connection closed while standing by")
        return False

    async def _opened(self, connection: AbstractConnection, leases: Leases) -> bool:
        """``agreed`` and every lock consumed, within ``OPEN_SECONDS`` (TimeoutError, and
        the session ends): the client bounds no call, and a declare or consume the broker
        never answered would leave this scheduler out, unheard, for the whole session."""
        async with asyncio.timeout(OPEN_SECONDS):
            return await agreed(connection, self.names, leases.count) and await leases.open()


def _died_under(error: BaseException, connection: AbstractConnection) -> bool:
    """True when ``error`` is aiormq's word that ``connection`` died under a call: it fails
    the calls under way with whatever it has (a bare RuntimeError; a CancelledError when it
    dropped a node whose heartbeats stopped). The session is over; the next one tries again."""
    if isinstance(error, asyncio.CancelledError) and being_cancelled():
        return False  # a cancel of this task: it must end
    return not isinstance(error, PUBLISH_ERRORS) and is_gone(connection)


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
