"""Partitions without a broker: where a schedule goes, who gives up what, what status says."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import cast

import pytest
from aio_pika.abc import AbstractChannel, AbstractConnection
from aio_pika.exceptions import ChannelInvalidStateError
from structlog.testing import capture_logs

from warren_cron.background import beside
from warren_cron.broker.again import until_it_works
from warren_cron.broker.connect import close_quietly
from warren_cron.clock import utcnow
from warren_cron.monitor.scheduler_down import SchedulerWatch
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.scheduler.beat import beat_of
from warren_cron.scheduler.offers import Offers
from warren_cron.scheduler.shares import disagreeing, partition_of, to_give_up
from warren_cron.schedules.heartbeats import Beat, SchedulerView, decode_beat

NOW = utcnow()


def beat(name: str, partitions: range | tuple[int, ...], count: int = 8, age: float = 0) -> Beat:
    """A fresh beat (``age`` seconds old, 1 s interval) of a scheduler leading ``partitions``."""
    at = NOW - timedelta(seconds=age)
    return Beat(name, bool(partitions), at, 1.0, None, None, 0.0, count, tuple(partitions))


def test_a_schedules_partition_is_fixed_and_the_partitions_are_even() -> None:
    """The same name always lands in the same partition, and 64,000 names fill 64 partitions
    within a tenth of the mean; one partition takes every schedule."""
    names = [f"customer-{n}-nightly" for n in range(64_000)]
    counts = Counter(partition_of(name, 64) for name in names)
    assert sorted(counts) == list(range(64))
    assert max(counts.values()) < 1100 and min(counts.values()) > 900
    assert [partition_of(name, 64) for name in names[:50]] == [
        partition_of(name, 64) for name in names[:50]
    ]
    assert {partition_of(name, 1) for name in names[:1000]} == {0}


def test_a_scheduler_over_its_share_gives_up_the_rest_only_while_another_is_under_its_own() -> None:
    """Alone it keeps all; beside a newcomer with none it keeps ceil(8/2); beside peers at
    their share it keeps what it has; at 4 beside 2 and 2 it gives one up (none is under
    8 // 3, but both are under the share of 3); a stale or other-count beat is not a
    peer."""
    everything = set(range(8))
    assert to_give_up(everything, "a", {"a": beat("a", range(8))}, 8, NOW) == []
    joined = {"b": beat("b", ())}
    assert to_give_up(everything, "a", joined, 8, NOW) == [4, 5, 6, 7]
    settled = {"b": beat("b", (3, 4, 5)), "c": beat("c", (6, 7))}
    assert to_give_up({0, 1, 2}, "a", settled, 8, NOW) == []
    stuck = {"b": beat("b", (4, 5)), "c": beat("c", (6, 7))}
    assert to_give_up({0, 1, 2, 3}, "a", stuck, 8, NOW) == [3]
    assert to_give_up(everything, "a", {"b": beat("b", (), age=60)}, 8, NOW) == []
    assert to_give_up(everything, "a", {"b": beat("b", (), count=16)}, 8, NOW) == []


def test_peers_that_took_none_of_the_partitions_given_up_for_them_are_not_counted_a_while() -> None:
    """Partitions given up for a peer came back with the peer still leading none (a forged
    beat): it is not counted for ten leases, so nothing is given up for it meanwhile; a
    peer that took some, or partitions that did not come back, change nothing."""
    forged = {"f:1": beat("f:1", ())}
    offers = Offers(lease=2.0)
    assert offers.counted(forged, NOW) == forged
    offers.made([4, 5, 6, 7], forged, share=4)
    assert offers.counted(forged, NOW) == forged  # not back yet
    offers.won(5)
    assert offers.counted(forged, NOW) == {}
    assert to_give_up(set(range(8)), "a", offers.counted(forged, NOW), 8, NOW) == []
    assert offers.counted(forged, NOW + timedelta(seconds=21)) == forged
    real = Offers(lease=2.0)
    real.made([4, 5, 6, 7], {"b:2": beat("b:2", ())}, share=4)
    real.won(4)  # b took them, then gave one back
    taken = {"b:2": beat("b:2", (5, 6, 7))}
    assert real.counted(taken, NOW) == taken
    other = Offers(lease=2.0)
    other.made([4, 5, 6, 7], forged, share=4)
    other.won(0)  # not one given up
    assert other.counted(forged, NOW) == forged


def test_a_leader_splitting_the_schedules_otherwise_is_named() -> None:
    """A live leader of another partition count is named; a standby or a stale one is not."""
    beats = {
        "old:1": beat("old:1", (0,), count=1),
        "idle:2": beat("idle:2", (), count=1),
        "gone:3": beat("gone:3", (0,), count=1, age=60),
        "same:4": beat("same:4", (1, 2)),
    }
    assert disagreeing(beats, 8, NOW) == ["old:1"]


def test_status_names_each_schedulers_partitions_and_any_left_unled() -> None:
    """The first line of status shows who leads which partitions, and PARTIAL when some
    partition has no leader."""
    whole = {"a:1": beat("a:1", range(0, 4)), "b:2": beat("b:2", (4, 5, 6, 7))}
    line = SchedulerView(True, whole, NOW).line()
    assert "2 lead 8 of 8 partitions (a:1 0-3, b:2 4-7" in line and "PARTIAL" not in line
    part = {"a:1": beat("a:1", (0, 1, 2, 5)), "b:2": beat("b:2", (7,), age=60)}
    line = SchedulerView(True, part, NOW).line()
    assert line.startswith("scheduler: PARTIAL: 4 partitions unled; 1 lead 4 of 8")
    assert "a:1 0-2,5" in line
    assert SchedulerView(True, part, NOW).unled == 4
    assert SchedulerView(True, whole, NOW).unled == 0


def test_a_beat_keeps_its_partitions_and_a_hostile_one_is_dropped() -> None:
    """Partitions survive the wire; a beat with partitions that are not numbers is no beat,
    and a beat of an older scheduler reads as one partition."""
    sent = beat("a:1", (0, 3, 7))
    assert decode_beat(sent.encode()) == sent
    hostile = sent.encode().replace(b"[0,3,7]", b'["x"]')
    assert decode_beat(hostile) is None
    old = (
        b'{"scheduler":"o:1","leading":true,"at":"2026-01-01T00:00:00+00:00","interval_seconds":5}'
    )
    decoded = decode_beat(old)
    assert decoded is not None and decoded.partition_count == 1 and decoded.partitions == ()


def test_a_stopping_schedulers_beat_says_it_leaves_and_no_partition_is_given_up_to_it() -> None:
    """A scheduler that stops beats once more, leaving (on the wire too): a peer that won
    its partitions keeps them all, where its last beat of none would have looked like a
    newcomer under the share; status counts it neither as a leader nor a standby."""
    stopping = Stopping()
    stopping.stopping.set()
    left = beat_of(stopping, 1.0, NOW)
    assert left.leaving and decode_beat(left.encode()) == left
    assert b"leaving" not in beat("a:1", (0,)).encode()
    assert to_give_up(set(range(8)), "a", {left.scheduler: left}, 8, NOW) == []
    view = SchedulerView(True, {left.scheduler: left}, NOW)
    assert view.leader is None and view.standbys == []
    assert decode_beat(left.encode().replace(b'"leaving":true', b'"leaving":"no"')) == replace(
        left, leaving=False
    )


async def test_beats_that_fail_on_the_broker_start_again_while_the_connection_lives() -> None:
    """A beat or the beats' reader failing on the broker (a stream not up yet after a
    restart, a channel closed under it) is tried again each interval, said once as a
    warning, where it stayed silent for the rest of the session; a gone connection ends
    the tries, and a failure that is no broker trouble is raised."""
    connection = Alive()
    calls: list[int] = []

    async def flaky() -> None:
        calls.append(len(calls))
        if len(calls) < 3:
            raise ChannelInvalidStateError("the channel closed")

    with capture_logs() as logs:
        assert await until_it_works(flaky, connection.as_one(), 0.01, "heartbeat")
    assert len(calls) == 3
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == [
        "heartbeat failed; trying again"
    ]
    connection.is_closed = True
    assert not await until_it_works(flaky, connection.as_one(), 0.01, "heartbeat")
    assert len(calls) == 3

    async def broken() -> None:
        raise ValueError("a defect, not the broker")

    connection.is_closed = False
    with pytest.raises(ValueError, match="a defect"):
        await until_it_works(broken, connection.as_one(), 0.01, "heartbeat")


async def test_a_cancel_turned_into_a_broker_error_ends_the_tries() -> None:
    """A session's end cancels its beats; aiormq closes the channel of the call cancelled,
    and that close may fail in place of the cancel: the tries end all the same (tried
    again, the session's end waited on them for ever and the scheduler never led again)."""
    entered = asyncio.Event()
    calls: list[int] = []

    async def call_then_cancelled() -> None:
        calls.append(1)
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise ChannelInvalidStateError("the channel closed") from None

    connection = Alive()
    tries = asyncio.create_task(
        until_it_works(call_then_cancelled, connection.as_one(), 0.01, "reading the beats")
    )
    await entered.wait()
    tries.cancel()
    done, _ = await asyncio.wait({tries}, timeout=10)  # bounds a failure that never ends
    connection.is_closed = True  # ends the tries where the cancel did not
    assert tries in done and tries.cancelled()
    assert calls == [1]


async def test_a_cancel_that_lands_in_a_channels_close_stays_a_cancel() -> None:
    """aiormq may answer a cancel during a channel's close with a broker error: the close
    ends cancelled all the same (swallowed, the beats' reading went on after its session
    ended, and the session waited on it for ever); a close that fails by itself is quiet."""
    entered = asyncio.Event()

    class Closing:
        async def close(self) -> None:
            entered.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                raise ChannelInvalidStateError("the channel closed") from None

    class Failing:
        async def close(self) -> None:
            raise ChannelInvalidStateError("the channel closed")

    closing = asyncio.create_task(close_quietly(cast(AbstractChannel, Closing())))
    await entered.wait()
    closing.cancel()
    done, _ = await asyncio.wait({closing}, timeout=10)
    assert closing in done and closing.cancelled()
    await close_quietly(cast(AbstractChannel, Failing()))


async def test_work_beside_a_block_that_swallows_a_cancel_is_cancelled_again() -> None:
    """Work that swallows the cancel of the block's end (as a library call can) is cancelled
    again and the block ends: it waited on it for ever, and the scheduler, its session over,
    beat on without ever leading again."""
    cancels: list[int] = []

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                cancels.append(1)
                if len(cancels) > 1:
                    raise

    async def block() -> None:
        async with beside(stubborn()):
            await asyncio.sleep(0)

    with capture_logs() as logs:
        done, _ = await asyncio.wait({asyncio.create_task(block())}, timeout=30)
    assert len(done) == 1 and cancels == [1, 1]
    [warned] = logs
    assert warned["event"] == "a task ran on after its cancel; cancelled again"
    assert warned["task"].endswith("stubborn")


class Alive:
    """What ``is_gone`` reads of a connection: open until ``is_closed`` is set."""

    def __init__(self) -> None:
        self.is_closed = False
        self.close_called = False
        self.transport = SimpleNamespace(connection=SimpleNamespace(is_closed=False))

    def as_one(self) -> AbstractConnection:
        """This, typed as the connection it stands for."""
        return cast(AbstractConnection, self)


class Stopping:
    """A scheduler that leads nothing and is stopping."""

    def __init__(self) -> None:
        self.leading = asyncio.Event()
        self.stopping = asyncio.Event()
        self.last_fire_at: datetime | None = None
        self.next_fire_at: datetime | None = None
        self.partitions: tuple[int, ...] = ()
        self.partition_count = 8


def test_the_monitor_alerts_while_a_partition_stays_unled_and_not_once_all_are_led() -> None:
    """A move leaves partitions unled for a moment: no alert; unled past
    CRON_SCHEDULER_DOWN_SECONDS, the scheduler.down alert names them; all led, it clears."""
    ticks = iter([0.0, 100.0, 200.0])
    settings = MonitorSettings(scheduler_down_seconds=30)
    watch = SchedulerWatch(settings, clock=lambda: next(ticks))
    part = SchedulerView(True, {"a:1": beat("a:1", (0, 1, 2, 5))}, NOW)
    assert watch._problem(part) is None
    problem = watch._problem(part)
    assert problem is not None and "PARTIAL: 4 partitions unled" in problem
    whole = {"a:1": beat("a:1", range(0, 4)), "b:2": beat("b:2", (4, 5, 6, 7))}
    assert watch._problem(SchedulerView(True, whole, NOW)) is None
