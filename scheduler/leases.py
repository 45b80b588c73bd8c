"""The partitions' leases of one connection: which partitions this scheduler leads.

Each partition has its own lock (``scheduler/leader.py``: a quorum queue with a single
active consumer, proved by probes). Every scheduler consumes every partition's lock, so a
partition whose leader dies goes to a waiting consumer at once. The single active consumer
hands every partition to the first scheduler that came, so the leases spread them: each
scheduler counts the live schedulers from their beats (N) and keeps at most
``ceil(count / N)`` partitions while another leads fewer than that; the rest it
gives up (the fire loop first stops firing them and writes their watermarks), consuming
their locks again a lease later, at the back of each queue's consumers.

With one partition the lease is the scheduler's one leader lock, as it always was.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Coroutine, Mapping
from datetime import datetime
from functools import partial
from typing import Any

import structlog
from aio_pika.abc import AbstractConnection

from warren_cron.background import beside, ended
from warren_cron.broker.again import until_it_works
from warren_cron.clock import utcnow
from warren_cron.errors import BROKER_TROUBLE
from warren_cron.names import Names
from warren_cron.scheduler.leader import LeaderLock, identity
from warren_cron.scheduler.offers import Offers
from warren_cron.scheduler.publisher import wait_for_event
from warren_cron.scheduler.shares import beyond_share, live_peers, share_of
from warren_cron.schedules.beat_follow import BeatFollower
from warren_cron.schedules.heartbeats import Beat

log = structlog.get_logger("scheduler")
#: What the log says when a partition's lock is opened again.
LOCK_REOPENED = "the lock's channel closed; opening it again"
#: What the log says when the beats are read again.
BEATS_BEHIND = "this scheduler's own beats stopped coming back; reading the beats again"


class Leases:
    """Every partition's lock on one connection; ``lost`` when a led one is lost."""

    def __init__(
        self,
        connection: AbstractConnection,
        names: Names,
        lease: float,
        count: int,
        wake: asyncio.Event,
    ) -> None:
        self.names = names
        self.lease = lease
        self.count = count
        #: Set when the connection closes or a led partition's lease runs out: stop firing.
        self.lost = asyncio.Event()
        #: Set whenever a partition is won (the fire loop takes it in).
        self.changed = asyncio.Event()
        #: The partitions this scheduler leads now.
        self.led: set[int] = set()
        self._gained: list[int] = []
        self._giving: list[int] = []
        self._every = lease / 4
        self.offers = Offers(lease)
        self._wake = wake
        self._stop = asyncio.Event()
        self._connection = connection
        self._locks: dict[int, LeaderLock] = {}
        self._holds: dict[int, asyncio.Task[None]] = {}
        connection.close_callbacks.add(lambda *_: self.lost.set())

    def queue(self, partition: int) -> str:
        """The lock queue of ``partition``."""
        return self.names.partition_leader_queue(partition, self.count)

    async def open(self) -> bool:
        """Consume every partition's lock; False while an older scheduler's exclusive lock
        holds one (the old leader keeps leading)."""
        for partition in range(self.count):
            if partition in self._locks:
                continue  # opened by an earlier try
            lock = LeaderLock(self._connection, self.names, self.lease, self.queue(partition))
            if not await lock.open():
                return False
            self._locks[partition] = lock
        return True

    def campaign(self, every: float, stop: asyncio.Event) -> None:
        """Probe for every partition (every ``every`` seconds) and hold each one won."""
        self._every, self._stop = every, stop
        for partition in self._locks:
            self._start(partition, self._hold(partition))

    def take_gained(self) -> list[int]:
        """The partitions won since the last call, for the fire loop to take in."""
        gained, self._gained = self._gained, []
        return gained

    def ask_to_give_up(self, partitions: list[int]) -> None:
        """Have the fire loop give ``partitions`` up at its next turn."""
        self._giving = [p for p in partitions if p in self.led]
        if self._giving:
            self._wake.set()

    def take_giving(self) -> list[int]:
        """The partitions to give up, for the fire loop to let go of first."""
        giving, self._giving = self._giving, []
        return giving

    async def give_up(self, partitions: list[int]) -> None:
        """Hand ``partitions`` on (their fires stopped and watermarks written), and consume
        their locks again a lease later, at the back of each queue."""
        for partition in partitions:
            self.led.discard(partition)
            await self._end(partition)
            await self._locks[partition].release()
            self._start(partition, self._rejoin(partition))
        log.info("partitions given up", partitions=partitions, leading=sorted(self.led))

    async def release(self) -> None:
        """Hand every led partition on at once (the fire loop has ended)."""
        led, self.led = sorted(self.led), set()
        for partition in led:
            await self._end(partition)
        await asyncio.gather(*(self._locks[p].release() for p in led if p in self._locks))

    async def close(self) -> None:
        """Stop probing and holding (the connection's close ends the consumers)."""
        for partition in list(self._holds):
            await self._end(partition)
        await asyncio.gather(*(lock.close() for lock in self._locks.values()))

    async def spread(self, interval: float) -> None:
        """Every ``interval`` seconds, ask to give up what this scheduler leads beyond its
        share while another leads less (read from the beats); until cancelled. The beats are
        followed again when this scheduler's own stop coming back (the reading is stuck)."""
        peers = BeatFollower(self.names)
        try:
            while await self._follow(peers, interval):
                await self._spread_while_read(peers, interval)
        finally:
            await peers.close()

    async def _follow(self, peers: BeatFollower, interval: float) -> bool:
        # False once the connection is gone: the next session spreads.
        await peers.close()
        follow = partial(peers.start, self._connection)
        return await until_it_works(follow, self._connection, interval, "reading the beats")

    async def _spread_while_read(self, peers: BeatFollower, interval: float) -> None:
        """Spread every ``interval`` seconds until no beat of this scheduler's own came back
        on time for a lease: the others' beats, read on the same consumer, are stuck too."""
        read_at = time.monotonic()
        while time.monotonic() - read_at <= self.lease:
            await asyncio.sleep(interval)
            now = utcnow()
            if not peers.behind(identity(), now):
                read_at = time.monotonic()
            if self.led and not self._giving:
                self._spread_once(peers.beats, now)
        log.warning(BEATS_BEHIND, lease_s=self.lease)

    def _spread_once(self, beats: Mapping[str, Beat], now: datetime) -> None:
        live = live_peers(self.offers.counted(beats, now), identity(), self.count, now)
        self.ask_to_give_up(beyond_share(self.led, live, self.count))
        if self._giving:
            self.offers.made(self._giving, live, share_of(self.count, len(live)))

    def _start(self, partition: int, work: Coroutine[Any, Any, None]) -> None:
        self._holds[partition] = asyncio.ensure_future(work)

    async def _end(self, partition: int) -> None:
        task = self._holds.pop(partition, None)
        if task is not None:
            await ended(task)

    async def _hold(self, partition: int) -> None:
        lock = await self._acquired(partition)
        if lock is None:
            return
        self.led.add(partition)
        self.offers.won(partition)
        self._gained.append(partition)
        self.changed.set()
        self._wake.set()
        await lock.keep()  # returns once its lease ran out or its connection closed
        if partition in self.led:
            log.warning("partition lost", partition=partition, queue=lock.queue)
            self.lost.set()

    async def _acquired(self, partition: int) -> LeaderLock | None:
        """The partition's lock once this scheduler holds it; None once it stops or the
        connection is gone. A lock whose own channel closed (the broker closes a channel on
        a queue not up yet after a restart) is opened again: silently given up, it left the
        scheduler standing by for that partition, unheard, for the rest of its session."""
        while not await self._locks[partition].acquire(self._every, self._stop):
            if self._stop.is_set() or self.lost.is_set() or not await self._reopened(partition):
                return None
        return self._locks[partition]

    async def _reopened(self, partition: int) -> bool:
        """The partition's lock on a channel of its own again, a probe interval later; False
        once the scheduler stops or the connection is gone."""
        await self._locks[partition].close()
        log.warning(LOCK_REOPENED, partition=partition)
        if await wait_for_event(self._stop, self._every):
            return False

        async def reopen() -> None:
            lock = LeaderLock(self._connection, self.names, self.lease, self.queue(partition))
            if await lock.open():  # else an older scheduler's exclusive lock: probed anyway
                self._locks[partition] = lock

        what = f"opening the lock of partition {partition} again"
        return await until_it_works(reopen, self._connection, self._every, what)

    async def _rejoin(self, partition: int) -> None:
        # Consuming again on the lock's own channel: one closed with probes still on their
        # way to it made aiormq log an error for each of them.
        if await wait_for_event(self._stop, self.lease):
            return
        try:
            await self._locks[partition].resume()
        except BROKER_TROUBLE:  # its channel closed meanwhile: a lock of its own again
            if not await self._reopened(partition):
                return
        await self._hold(partition)


@contextlib.asynccontextmanager
async def spreading(leases: Leases) -> AsyncIterator[None]:
    """Spread the partitions while the block runs (one partition: nothing to spread)."""
    if leases.count == 1:
        yield
        return
    async with beside(leases.spread(leases.lease / 2)):
        yield
