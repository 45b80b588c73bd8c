"""Schedules split across schedulers: partitions spread, move, and keep every fire once."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path

import aio_pika
import pytest
from aio_pika.abc import AbstractChannel

from tests.failed_records import run_warren
from tests.namespace import TestBroker
from tests.pausing import schedules_script
from tests.scheduling import (
    Process,
    Spawner,
    env_for,
    evenly_led,
    partitioned,
    published,
    write_schedules,
)
from warren_cron.background import beside
from warren_cron.client import Client
from warren_cron.clock import utcnow
from warren_cron.faultkit.waits import eventually
from warren_cron.scheduler.offers import NOT_COUNTED
from warren_cron.scheduler.shares import partition_of
from warren_cron.scheduler.watermark import Watermark
from warren_cron.schedules.heartbeats import Beat

pytestmark = pytest.mark.broker
SECOND = timedelta(seconds=1)
PARTITIONS = 8
SCHEDULES = [f"s{n:02}" for n in range(16)]
TICKS = "".join(
    f'[[schedule]]\nname = "{name}"\nevery = "1s"\ntask = "noop"\ncatch_up = "all"\n'
    f"misfire_grace_seconds = 120\n"
    for name in SCHEDULES
)


def partitioned_env(broker: TestBroker, path: Path) -> dict[str, str]:
    """A scheduler of 8 partitions with a 2 s lease and quick beats."""
    broker.partitions = PARTITIONS
    return env_for(broker, **partitioned(path, PARTITIONS, heartbeat=1))


def leads(process: Process) -> set[int]:
    """The partitions ``process`` said last that it leads (none once it exited)."""
    if process.proc.returncode is not None:
        return set()
    said = process.named("leading partitions")
    return set(said[-1]["partitions"]) if said else set()


def spread(processes: list[Process]) -> bool:
    """Every partition led by exactly one of ``processes``, each within one of the others."""
    return evenly_led([leads(p) for p in processes], PARTITIONS)


async def ledger(broker: TestBroker) -> dict[str, list[datetime]]:
    """Each schedule's fire times, as published, in order."""
    fires: dict[str, list[datetime]] = {name: [] for name in SCHEDULES}
    for _, envelope in await published(broker):
        assert envelope.schedule is not None
        fires[envelope.schedule].append(envelope.scheduled_for)
    return fires


def gaps(times: list[datetime]) -> list[datetime]:
    """Seconds between the first fire and the last that never fired."""
    seen = set(times)
    span = int((max(times) - min(times)) / SECOND)
    return [min(times) + n * SECOND for n in range(span + 1) if min(times) + n * SECOND not in seen]


async def test_partitions_spread_over_joining_schedulers_and_move_on_a_stop_losing_none(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """One scheduler leads all 8 partitions; two more join and take their share; the first
    stops and its share moves: every schedule fired every second, none twice."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, TICKS)
    env = partitioned_env(broker, path)
    first = await spawn(["-m", "warren_cron.scheduler"], env)
    await eventually(lambda: len(leads(first)) == PARTITIONS, 20, what="one leads all")
    others = [await spawn(["-m", "warren_cron.scheduler"], env) for _ in range(2)]
    await eventually(lambda: spread([first, *others]), 30, what="8 partitions over 3")
    assert first.named("partitions given up")
    assert await first.stop() == 0
    await eventually(lambda: spread(others), 20, what="8 partitions over the 2 left")
    moved_at = await broker.depth(broker.names.main_queue)
    await broker.wait_depth(broker.names.main_queue, moved_at + 2 * len(SCHEDULES), 15)
    assert [await p.stop() for p in others] == [0, 0]
    for name, times in (await ledger(broker)).items():
        assert gaps(times) == [], name
        assert max(Counter(times).values()) == 1, name


async def test_a_killed_schedulers_partitions_move_within_seconds_and_catch_up(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """kill -9 one of three: its partitions are led again within a few leases, the fires
    due meanwhile are caught up, and a repeat is only a fire of its own partitions."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, TICKS)
    env = partitioned_env(broker, path)
    schedulers = [await spawn(["-m", "warren_cron.scheduler"], env) for _ in range(3)]
    await eventually(lambda: spread(schedulers), 40, what="8 partitions over 3")
    victim, *left = schedulers
    orphaned = leads(victim)
    await victim.kill()
    killed_at = time.monotonic()
    await eventually(lambda: spread(left), 30, what="8 partitions over the 2 left")
    moved = time.monotonic() - killed_at
    moved_at = await broker.depth(broker.names.main_queue)
    await broker.wait_depth(broker.names.main_queue, moved_at + 2 * len(SCHEDULES), 15)
    assert [await p.stop() for p in left] == [0, 0]
    for name, times in (await ledger(broker)).items():
        assert gaps(times) == [], name
        repeats = sum(n - 1 for n in Counter(times).values())
        # A kill between a fire's confirm and its watermark can repeat that one fire.
        assert repeats <= (1 if partition_of(name, PARTITIONS) in orphaned else 0), name
    assert moved < 15, f"partitions led again {moved:.1f}s after the kill"


async def test_every_partition_catches_up_from_its_own_watermark_after_all_were_down(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """Every scheduler stopped for a few seconds, then two start: each partition catches up
    from its own watermark (one moved 3 s on, as if its last leader had fired 3 s more,
    loses exactly those 3 s; every other schedule misses nothing and repeats nothing)."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, TICKS)
    env = partitioned_env(broker, path)
    pair = [await spawn(["-m", "warren_cron.scheduler"], env) for _ in range(2)]
    await eventually(lambda: spread(pair), 30, what="8 partitions over 2")
    await broker.wait_depth(broker.names.main_queue, 3 * len(SCHEDULES), 20)
    assert [await p.stop() for p in pair] == [0, 0]
    moved = partition_of(SCHEDULES[0], PARTITIONS)
    channel = await broker.channel()
    queue = broker.names.partition_watermark_queue(moved, PARTITIONS)
    store = Watermark(channel, broker.names, broker.queue_type, queue)
    await store.declare()
    mark = await store.read()
    assert mark is not None
    await store.write(mark + 3 * SECOND)
    await channel.close()
    await asyncio.sleep(4)  # the outage itself: every scheduler down for 4 s
    pair = [await spawn(["-m", "warren_cron.scheduler"], env) for _ in range(2)]
    before = await broker.depth(broker.names.main_queue)
    await broker.wait_depth(broker.names.main_queue, before + 8 * len(SCHEDULES), 30)
    assert [await p.stop() for p in pair] == [0, 0]
    for name, times in (await ledger(broker)).items():
        whole = mark.replace(microsecond=0)
        skipped = [whole + n * SECOND for n in (1, 2, 3)] if name in moved_names(moved) else []
        assert gaps(times) == skipped, name
        assert max(Counter(times).values()) == 1, name


def moved_names(partition: int) -> set[str]:
    """The test's schedules in ``partition``."""
    return {name for name in SCHEDULES if partition_of(name, PARTITIONS) == partition}


async def test_runtime_schedules_created_while_leading_keep_firing_when_their_partition_moves(
    broker: TestBroker, spawn: Spawner, tmp_path: Path, client: Client
) -> None:
    """Runtime schedules created after both schedulers began, then one stops: the other
    takes its partitions in with those schedules as they run now, each firing every second."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, "")
    env = partitioned_env(broker, path)
    pair = [await spawn(["-m", "warren_cron.scheduler"], env) for _ in range(2)]
    await eventually(lambda: spread(pair), 30, what="8 partitions over 2")
    for name in SCHEDULES:
        spec = {"name": name, "every": "1s", "task": "noop", "catch_up": "all"}
        await client.create_schedule({**spec, "misfire_grace_seconds": 120})
    await broker.wait_depth(broker.names.main_queue, 2 * len(SCHEDULES), 20)
    leaving, staying = pair
    given = len(staying.named("partitions given up"))
    assert await leaving.stop() == 0
    await eventually(lambda: len(leads(staying)) == PARTITIONS, 20, what="all on one")
    moved_at = await broker.depth(broker.names.main_queue)
    await broker.wait_depth(broker.names.main_queue, moved_at + 2 * len(SCHEDULES), 15)
    assert await staying.stop() == 0
    # The stopped one said it was leaving: none is given up to it (they fired late, a lease on).
    assert len(staying.named("partitions given up")) == given
    for name, times in (await ledger(broker)).items():
        assert gaps(times) == [] and max(Counter(times).values()) == 1, name
        assert max(times) - min(times) >= 3 * SECOND, name  # fired on after the move


async def test_a_pause_and_a_resume_reach_the_leader_of_the_schedules_partition(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """With the schedules split over two schedulers, ``warren schedules pause`` holds one
    schedule's fires (whoever leads its partition) while the others go on; ``resume`` and
    ``trigger`` run it again, and ``warren status`` says who leads which partitions."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, TICKS)
    env = partitioned_env(broker, path)
    pair = [await spawn(["-m", "warren_cron.scheduler"], env) for _ in range(2)]
    await eventually(lambda: spread(pair), 30, what="8 partitions over 2")
    split = {"CRON_SCHEDULER_PARTITIONS": str(PARTITIONS)}
    paused = await schedules_script(broker, path, "pause", "s05", "--reason", "r", **split)
    assert paused.returncode == 0, paused.stderr
    paused_at = utcnow()
    held = await broker.depth(broker.names.main_queue)
    await broker.wait_depth(broker.names.main_queue, held + 4 * (len(SCHEDULES) - 1), 15)
    resumed_at = utcnow()
    resumed = await schedules_script(broker, path, "resume", "s05", **split)
    assert resumed.returncode == 0, resumed.stderr
    await eventually(lambda: fired_after(broker, "s05", resumed_at), 15, what="s05 again")
    status = await asyncio.to_thread(run_warren, broker, "status", **split)
    assert status.returncode == 0, status.stderr
    assert "2 lead 8 of 8 partitions" in status.stdout
    triggered = await schedules_script(broker, path, "trigger", "s05", **split)
    assert triggered.returncode == 0, triggered.stderr
    await eventually(lambda: has_run(broker, triggered.stdout.strip()), 15, what="trigger")
    assert [await p.stop() for p in pair] == [0, 0]
    # The pause reaches the leader within moments: none of its fires due 2 s after it.
    held_back = [t for t in (await ledger(broker))["s05"] if paused_at + 2 * SECOND < t]
    assert [t for t in held_back if t < resumed_at] == []
    assert resumed_at - paused_at >= 3 * SECOND


async def fired_after(broker: TestBroker, name: str, moment: datetime) -> bool:
    """Whether schedule ``name`` has a fire due after ``moment`` in the main queue."""
    return any(t > moment for t in (await ledger(broker))[name])


async def has_run(broker: TestBroker, run_id: str) -> bool:
    """Whether the main queue holds the run ``run_id``."""
    return any(envelope.run_id == run_id for _, envelope in await published(broker))


async def test_a_forged_beat_of_a_scheduler_leading_nothing_costs_one_lease_at_most(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """Beats of a scheduler that does not exist, leading nothing: the one real scheduler
    gives half its partitions up for it once; they come back a lease later, the forger is
    not counted from then on, and every schedule fired every second, none twice."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, TICKS)
    real = await spawn(["-m", "warren_cron.scheduler"], partitioned_env(broker, path))
    await eventually(lambda: len(leads(real)) == PARTITIONS, 20, what="one leads all")
    async with forging(broker):
        await eventually(lambda: real.named("partitions given up"), 20, what="a give-up")
        await eventually(lambda: real.named(NOT_COUNTED), 20, what="the forger left out")
        await eventually(lambda: len(leads(real)) == PARTITIONS, 20, what="all back")
        back_at = await broker.depth(broker.names.main_queue)
        await broker.wait_depth(broker.names.main_queue, back_at + 4 * len(SCHEDULES), 20)
    assert await real.stop() == 0
    assert len(real.named("partitions given up")) == 1
    for name, times in (await ledger(broker)).items():
        assert gaps(times) == [] and max(Counter(times).values()) == 1, name


@contextlib.asynccontextmanager
async def forging(broker: TestBroker) -> AsyncIterator[None]:
    """Fresh beats of ``forged:1`` (8 partitions, leading none) every 0.2 s for the block."""

    async def forge(channel: AbstractChannel) -> None:
        while True:
            beat = Beat("forged:1", False, utcnow(), 0.5, partition_count=PARTITIONS)
            await channel.default_exchange.publish(
                aio_pika.Message(beat.encode()), broker.names.beat_stream
            )
            await asyncio.sleep(0.2)  # the forger's own pace, not a wait on the product

    async with await aio_pika.connect(broker.url) as connection:
        channel = await connection.channel()
        async with beside(forge(channel)):
            yield
