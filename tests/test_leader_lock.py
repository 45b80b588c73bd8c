"""The scheduler's leader lock against a real broker: one leader among racing schedulers, a
lease that ends a leader whose probes stop coming back, and an older scheduler's lock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import aio_pika
import pytest
from structlog.testing import capture_logs

import warren_cron.scheduler.leader
import warren_cron.scheduler.service
from tests.namespace import TestBroker
from tests.scheduling import (
    Schedulers,
    every,
    scheduler_settings,
    wait_published,
    write_schedules,
)
from warren_cron.broker.exclusive import consumer_count, try_exclusive
from warren_cron.errors import BrokerUnavailable
from warren_cron.faultkit.waits import eventually
from warren_cron.scheduler.leader import LeaderLock
from warren_cron.scheduler.leases import LOCK_REOPENED, Leases
from warren_cron.scheduler.service import Scheduler
from warren_cron.schedules.load import load_schedules

pytestmark = pytest.mark.broker


async def test_a_lock_opened_on_a_connection_that_died_says_the_broker_is_unavailable(
    broker: TestBroker,
) -> None:
    """A scheduler standing by whose connection dies while it opens its locks gets a broker
    error, which its campaign retries; it was aiormq's bare RuntimeError, which ended the
    process (a broker restart while partitions moved, in CI)."""
    connection = await aio_pika.connect(broker.url)
    await connection.close()
    with pytest.raises(BrokerUnavailable, match="connection is down"):
        await LeaderLock(connection, broker.names, lease=4.0).open()


async def test_of_five_locks_racing_on_a_new_queue_exactly_one_holds(broker: TestBroker) -> None:
    """Five sessions consume the lock queue and probe at once: one holds, four stand by, and
    the queue counts one active consumer; the holder's connection closed, another holds."""
    connections = [await aio_pika.connect(broker.url) for _ in range(5)]
    try:
        locks = [LeaderLock(c, broker.names, lease=4.0) for c in connections]
        # The first declare alone: two first declares of one quorum queue at once can end a
        # connection with INTERNAL_ERROR on 3.10, which a scheduler retries as a lost session.
        assert await locks[0].open()
        assert all(await asyncio.gather(*(lock.open() for lock in locks[1:])))
        never = asyncio.Event()
        won = await asyncio.gather(*(lock.acquire(0.5, never) for lock in locks[:1]))
        waits = [asyncio.create_task(lock.acquire(0.2, never)) for lock in locks[1:]]
        await asyncio.sleep(1.5)
        assert won == [True] and not any(w.done() for w in waits)
        assert [lock.holds() for lock in locks].count(True) == 1
        assert await consumer_count(broker.connection, broker.names.leader_queue) == 1
        await connections[0].close()
        done, _ = await asyncio.wait(waits, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1 and [lock.holds() for lock in locks[1:]].count(True) == 1
        for wait in waits:
            wait.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
    finally:
        for connection in connections:
            await connection.close()
        channel = await broker.connection.channel()
        await channel.queue_delete(broker.names.leader_queue)


@dataclass
class TwoLocks:
    """A leader holding the lock queue and a second lock opened beside it, each on a
    connection of its own."""

    connections: Sequence[aio_pika.abc.AbstractConnection]
    leader: LeaderLock
    other: LeaderLock


@pytest.fixture
async def two_locks(broker: TestBroker) -> AsyncIterator[TwoLocks]:
    """Two locks of lease 30 s, the first leading; connections closed and the queue deleted
    after."""
    connections = [await aio_pika.connect(broker.url) for _ in range(2)]
    try:
        leader, other = (LeaderLock(c, broker.names, lease=30.0) for c in connections)
        assert await leader.open() and await other.open()
        assert await leader.acquire(0.5, asyncio.Event())
        yield TwoLocks(connections, leader, other)
    finally:
        for connection in connections:
            await connection.close()
        channel = await broker.connection.channel()
        await channel.queue_delete(broker.names.leader_queue)


async def test_a_standby_leads_on_the_probe_the_dead_leader_held(two_locks: TwoLocks) -> None:
    """The leader holds the standby's newest probe unacked: when the leader's connection
    closes (a kill -9 closes its socket), the queue gives the probe back to the standby it
    makes active, which leads on it at once, without another probe; probing once a minute,
    it waited up to that minute."""
    leader, standby = two_locks.leader, two_locks.other
    waiting = asyncio.create_task(standby.acquire(60.0, asyncio.Event()))
    await eventually(lambda: standby._session in leader._held, 10, what="the probe held")
    sent = standby._seq
    await two_locks.connections[0].close()
    assert await asyncio.wait_for(waiting, 20) and standby.holds()
    assert standby._seq == sent


async def test_a_held_probe_is_let_go_after_hold_seconds(
    two_locks: TwoLocks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe is held for ``HOLD_SECONDS`` at most, then acked: a broker cancels a consumer
    (RabbitMQ 4) or closes its channel (3.x) that holds a delivery past its consumer timeout,
    which would end the leadership; the leader leads on."""
    monkeypatch.setattr(warren_cron.scheduler.leader, "HOLD_SECONDS", 0.2)
    leader, other = two_locks.leader, two_locks.other
    other.probe()
    await eventually(lambda: other._session in leader._held, 10, what="the probe held")
    await eventually(lambda: not leader._held, 10, what="the probe let go")
    assert leader.holds() and not leader.lost.is_set()


async def test_junk_and_probes_of_many_sessions_in_the_lock_queue_hold_little(
    broker: TestBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Anything published into the lock queue by another client: what is no probe is acked
    and dropped, probes of more sessions than ``PROBES_KEPT`` are not all held, and the
    leader goes on proving its lease with its own probes."""
    monkeypatch.setattr(warren_cron.scheduler.leader, "PROBES_KEPT", 3)
    monkeypatch.setattr(warren_cron.scheduler.leader, "HOLD_SECONDS", 60.0)  # counted, not let go
    connection = await aio_pika.connect(broker.url)
    try:
        leader = LeaderLock(connection, broker.names, lease=30.0)
        assert await leader.open() and await leader.acquire(0.5, asyncio.Event())
        channel = await broker.connection.channel()
        notes = [b"not json", b"[1]", b'{"session": 5}', b'{"session": "x", "seq": true}']
        notes += [b'{"session": "s%d", "seq": 1}' % n for n in range(10)]
        for body in notes:
            await channel.default_exchange.publish(aio_pika.Message(body), leader.queue)
        await eventually(lambda: len(leader._held) == 3, 10, what="three sessions held")
        proved = leader._lease_until
        leader.probe()
        await eventually(lambda: leader._lease_until > proved, 10, what="its own probe back")
        assert len(leader._held) == 3 and leader.holds()
        queue = await channel.declare_queue(leader.queue, passive=True)
        assert queue.declaration_result.message_count == 0  # none left unread
    finally:
        await connection.close()
        channel = await broker.connection.channel()
        await channel.queue_delete(broker.names.leader_queue)


async def test_a_leader_whose_probes_stop_coming_back_steps_down_within_its_lease(
    broker: TestBroker, schedulers: Schedulers, tmp_path: Path
) -> None:
    """The lock queue deleted under the leader (its consumer gone, its probes unroutable, as
    on a node cut off from the majority): it stops leading within a lease, then declares the
    queue again and leads."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1s"))
    with capture_logs() as logs:
        instance = await schedulers.start(path, scheduler_heartbeat_seconds=1)
        await wait_published(broker, 1)
        channel = await broker.connection.channel()
        await channel.queue_delete(broker.names.leader_queue)
        await eventually(lambda: not instance.leading.is_set(), timeout=2 + 2)  # lease 2 s
        assert any(e["event"] == "leader lease ran out: no probe came back" for e in logs)
        await eventually(instance.leading.is_set, timeout=10)


async def test_a_scheduler_stands_by_while_an_older_schedulers_exclusive_lock_is_held(
    broker: TestBroker, tmp_path: Path
) -> None:
    """An older warren's leader holds the exclusive queue of the same name: a new scheduler
    stands by (never two leaders across versions) and leads once that queue is gone."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1s"))
    old = await aio_pika.connect(broker.url)
    assert await try_exclusive(old, broker.names.leader_queue) is not None
    settings = scheduler_settings(broker, path)
    instance = Scheduler(settings, load_schedules(path, settings))
    with capture_logs() as logs:
        task = asyncio.create_task(instance.run())
        try:
            await eventually(lambda: any(e["event"] == STANDING_BY for e in logs), 10)
            await asyncio.sleep(1)  # five retries at 0.2 s
            assert not instance.leading.is_set() and instance.last_fire_at is None
            await old.close()
            await eventually(instance.leading.is_set, timeout=10)
            await wait_published(broker, 1)
        finally:
            await old.close()
            instance.stop()
            await asyncio.wait_for(task, 15)


STANDING_BY = "standing by: another scheduler leads"


async def test_a_partition_lock_whose_channel_closes_while_standing_by_is_opened_again(
    broker: TestBroker,
) -> None:
    """The channel of one partition's lock closes before it is won (the broker closes one on a
    queue not up yet after a restart): the lock is opened again and the partition won, said
    as a warning; it was left unprobed, the scheduler out of it for the whole session."""
    broker.partitions = 2  # the locks' queues go with the namespace
    async with await aio_pika.connect(broker.url) as connection:
        leases = Leases(connection, broker.names, 2.0, 2, asyncio.Event())
        assert await leases.open()
        channel = leases._locks[0]._channel
        assert channel is not None
        await channel.close()
        stop = asyncio.Event()
        with capture_logs() as logs:
            leases.campaign(0.2, stop)
            try:
                await eventually(lambda: leases.led == {0, 1}, 20, what="both partitions won")
            finally:
                stop.set()
                await leases.close()
    warned = [e for e in logs if e["log_level"] == "warning"]
    assert [(e["event"], e["partition"]) for e in warned] == [(LOCK_REOPENED, 0)]


async def test_a_session_whose_locks_never_open_ends_and_the_next_one_leads(
    broker: TestBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A consume the broker never answers while the locks open: the session ends after
    OPEN_SECONDS with a warning, and the next session leads. It waited for ever, unheard."""
    opened = Leases.open
    tries: list[int] = []

    async def never_the_first_time(self: Leases) -> bool:
        tries.append(1)
        if len(tries) == 1:
            await asyncio.Event().wait()
        return await opened(self)

    monkeypatch.setattr(Leases, "open", never_the_first_time)
    monkeypatch.setattr(warren_cron.scheduler.service, "OPEN_SECONDS", 1.0)
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1s"))
    settings = scheduler_settings(broker, path)
    instance = Scheduler(settings, load_schedules(path, settings))
    with capture_logs() as logs:
        task = asyncio.create_task(instance.run())
        try:
            await eventually(instance.leading.is_set, timeout=30)
        finally:
            instance.stop()
            await asyncio.wait_for(task, 15)
    assert len(tries) == 2
    # The session cut by the bound said so; a 3.10 broker may also close a connection with
    # INTERNAL_ERROR at a namespace's first declares (its own warning, a session tried again).
    ended = [e["error"] for e in logs if e["log_level"] == "warning" and "error" in e]
    assert [e for e in ended if e.startswith("TimeoutError")] != [], ended
