"""A scheduler reads the others' beats to spread its partitions, on a real broker: a reading
that stops getting beats is found by this scheduler's own beats not coming back, and read
again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aio_pika
import pytest
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage
from structlog.testing import capture_logs

from tests.namespace import TestBroker
from warren_cron.background import beside
from warren_cron.clock import utcnow
from warren_cron.faultkit.waits import eventually
from warren_cron.monitor.scheduler_down import SchedulerWatch
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.scheduler.leader import LOCK_ARGUMENTS, identity
from warren_cron.scheduler.leases import BEATS_BEHIND, Leases
from warren_cron.schedules.beat_follow import BeatFollower
from warren_cron.schedules.heartbeats import Beat, declare_beats

pytestmark = pytest.mark.broker
PARTITIONS = 8
#: The beats' interval here: a reading is behind once this scheduler's own is 0.4 s late.
INTERVAL = 0.2
#: One scheduler leading the one partition.
LEADER = {"leader:1": range(1)}


@contextlib.asynccontextmanager
async def beating(
    broker: TestBroker, leading: dict[str, range], count: int = PARTITIONS
) -> AsyncIterator[None]:
    """Beats of each scheduler named in ``leading``, of the partitions given (of ``count``),
    every 0.2 s."""

    async def beat(channel: AbstractChannel) -> None:
        while True:
            for name, partitions in leading.items():
                sent = Beat(
                    name,
                    bool(partitions),
                    utcnow(),
                    INTERVAL,
                    partition_count=count,
                    partitions=tuple(partitions),
                )
                await channel.default_exchange.publish(
                    aio_pika.Message(sent.encode()), broker.names.beat_stream
                )
            await asyncio.sleep(INTERVAL)  # the beats' own pace, not a wait on the product

    async with await aio_pika.connect(broker.url) as connection:
        await declare_beats(connection, broker.names)
        async with beside(beat(await connection.channel())):
            yield


async def dropped(message: AbstractIncomingMessage) -> None:
    """What the test's lock consumer does with a message: nothing."""


def stuck_first_reading(monkeypatch: pytest.MonkeyPatch) -> list[AbstractChannel]:
    """Make the first reading of the beats get nothing; the channels of every reading."""
    readings: list[AbstractChannel] = []
    follow = BeatFollower._follow

    async def nothing_the_first_time(self: BeatFollower, channel: AbstractChannel) -> None:
        readings.append(channel)
        if len(readings) > 1:
            await follow(self, channel)

    monkeypatch.setattr(BeatFollower, "_follow", nothing_the_first_time)
    return readings


async def test_a_beat_reading_that_gets_nothing_is_read_again_and_the_partitions_spread(
    broker: TestBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first consumer of the beats gets nothing, as one attached while the node
    restarted did (RabbitMQ 3.10: the old beats, then none, on an open channel): once this
    scheduler's own beats have not come back for a lease, the beats are read again (said
    as a warning), and the partitions beyond its share are given up for the peer under it.
    Without the new reading, the scheduler kept all 8 for the rest of its session."""
    readings = stuck_first_reading(monkeypatch)
    leading = {identity(): range(PARTITIONS), "peer:1": range(0)}
    async with await aio_pika.connect(broker.url) as connection, beating(broker, leading):
        leases = Leases(connection, broker.names, 1.0, PARTITIONS, asyncio.Event())
        leases.led = set(range(PARTITIONS))
        with capture_logs() as logs:
            async with beside(leases.spread(INTERVAL)):
                giving = await eventually(leases.take_giving, 30, what="a give-up")
    assert giving == [4, 5, 6, 7]
    assert len(readings) == 2
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [BEATS_BEHIND]


async def test_the_monitor_reads_the_beats_again_when_none_come_while_the_lock_is_held(
    broker: TestBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The monitor's first reading of the beats gets nothing while a scheduler holds the
    leader queue and beats: past half of CRON_SCHEDULER_DOWN_SECONDS without a beat, the
    beats are read again and the leader is seen; scheduler.down never fires (it did, for a
    live scheduler, until the monitor's connection dropped)."""
    readings = stuck_first_reading(monkeypatch)
    settings = MonitorSettings(
        namespace=broker.names.namespace, amqp_url=broker.url, scheduler_down_seconds=2
    )
    watch = SchedulerWatch(settings)
    async with await aio_pika.connect(broker.url) as connection, beating(broker, LEADER, 1):
        channel = await connection.channel()
        lock = await channel.declare_queue(
            broker.names.leader_queue, durable=True, arguments=LOCK_ARGUMENTS
        )
        await lock.consume(dropped, no_ack=True)
        await watch.start(connection)
        changes = []

        async def leader_seen() -> bool:
            changes.extend(await watch.check(connection, utcnow()))
            return watch.view is not None and watch.view.leader is not None

        await eventually(leader_seen, 30, what="the leader seen", interval=0.5)
    assert changes == [] and not watch.firing
    assert len(readings) == 2
