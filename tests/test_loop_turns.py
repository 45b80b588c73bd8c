"""Work that grows with the schedules lets the event loop run between its chunks: a leader of
1,000,000 schedules that planned its file's apply, decoded the store's snapshot, built its
schedules or took a partition's into its heap in one go answered no probe and no heartbeat
for seconds (15-20 s for the first three), lost its lease and its connection, and started
over, for ever."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta
from types import SimpleNamespace

import pytest

from warren_cron.names import Names
from warren_cron.scheduler import marks
from warren_cron.scheduler import runtime as runtime_module
from warren_cron.scheduler.firing import FireHeap
from warren_cron.scheduler.runtime import RuntimeSchedules
from warren_cron.scheduler.settings import SchedulerSettings
from warren_cron.scheduler.shares import partition_of
from warren_cron.schedules.load import ScheduleSet, parse_schedules
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.schedules.timing import EPOCH
from warren_cron.store import apply, snapshot
from warren_cron.store.apply import Options, plan_apply
from warren_cron.store.changes import Change
from warren_cron.store.snapshot import SnapshotIndex, read_snapshot, snapshot_bodies
from warren_cron.store.state import StoreState


@asynccontextmanager
async def turns() -> AsyncIterator[Callable[[], int]]:
    """Count the event loop's turns while the block runs (a task that yields each turn)."""
    count = 0

    async def ticking() -> None:
        nonlocal count
        while True:
            count += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(ticking())
    await asyncio.sleep(0)
    start = count
    try:
        yield lambda: count - start
    finally:
        ticker.cancel()


def stored(count: int) -> StoreState:
    """A store's state holding ``count`` runtime schedules, each created once."""
    state = StoreState({}, -1)
    for n in range(count):
        spec = {"name": f"s{n}", "every": "1h", "task": "noop"}
        change = Change("create", f"s{n}", 0, "test", None, spec, None)
        assert state.apply(change) is None
    return state


async def test_a_large_plan_lets_the_event_loop_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planning an apply hands the loop back every ``PLAN_CHUNK`` specs."""
    monkeypatch.setattr(apply, "PLAN_CHUNK", 10)
    specs = [ScheduleSpec(name=f"s{n}", every="1h", task="noop") for n in range(100)]
    async with turns() as counted:
        plan = await plan_apply(iter(specs), {}, Options("deploy.toml", frozenset()))
    assert counted() >= 10
    assert [(s.action, s.name) for s in plan.steps] == [("create", s.name) for s in specs]


async def test_building_every_schedule_lets_the_event_loop_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A term's start builds its runtime schedules ``BUILD_CHUNK`` at a time."""
    monkeypatch.setattr(runtime_module, "BUILD_CHUNK", 10)
    schedules = RuntimeSchedules(SchedulerSettings(), Names("t"), asyncio.Event())
    schedules.book.state = stored(100)
    async with turns() as counted:
        await schedules._build_all()
    assert counted() >= 10
    assert sorted(schedules._built) == sorted(f"s{n}" for n in range(100))


async def test_a_snapshot_is_decoded_beside_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store's snapshot is decompressed and decoded off the event loop's thread, while
    the loop goes on turning."""
    state = stored(20_000)
    [body] = await snapshot_bodies(state)
    decoded_on: list[threading.Thread] = []
    decode = snapshot.state_of

    def state_of(text: bytes) -> StoreState | SnapshotIndex:
        decoded_on.append(threading.current_thread())
        return decode(text)

    monkeypatch.setattr(snapshot, "state_of", state_of)
    async with turns() as counted:
        read = await read_snapshot(body)
    assert decoded_on and threading.main_thread() not in decoded_on
    assert counted() >= 3
    assert isinstance(read, StoreState) and read.entries.keys() == state.entries.keys()


async def test_pruning_a_files_schedules_from_a_large_store_lets_the_event_loop_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An apply that prunes looks for the file's schedules no longer in it among every
    entry of the store ``PLAN_CHUNK`` at a time (a million runtime schedules held the loop
    for seconds), and archives exactly those, by name."""
    monkeypatch.setattr(apply, "PLAN_CHUNK", 10)
    entries = stored(100).entries
    for name in ("s7", "s3", "s50"):
        entries[name].manager = "deploy.toml"
    kept = [ScheduleSpec(name="s50", every="1h", task="noop")]
    async with turns() as counted:
        plan = await plan_apply(iter(kept), entries, Options("deploy.toml", frozenset(), True))
    assert counted() >= 10
    assert [(s.action, s.name) for s in plan.steps if s.action == "archive"] == [
        ("archive", "s3"),
        ("archive", "s7"),
    ]


async def test_partitions_moved_in_and_out_let_the_event_loop_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A partition won is taken into the heap from its watermark, and one given up taken
    out, ``TAKE_CHUNK`` schedules at a time (300,000 at once held the loop for 7.7 s, past
    the beats and the leases' probes): its schedules then fire from the watermark on, and
    once let go, not at all."""
    monkeypatch.setattr(marks, "TAKE_CHUNK", 10)
    kinds = parse_schedules(
        "\n".join(
            f'[[schedule]]\nname = "k{n}"\ntask = "noop"\nevery = "{n + 2}s"' for n in range(7)
        ),
        SchedulerSettings(),
    ).schedules
    schedules = [replace(kinds[n % 7], name=f"s{n}") for n in range(200)]
    mine = [s for s in schedules if partition_of(s.name, 2) == 1]
    heap, watermark = FireHeap(ScheduleSet("t", ()), EPOCH), EPOCH + timedelta(seconds=3)
    async with turns() as counted:
        await marks.take_in(heap, schedules, SimpleNamespace(count=2), {1: watermark}, {})  # type: ignore[arg-type]
    assert counted() >= 10
    now = watermark + timedelta(seconds=2)
    due = {s.name for s in mine if (s.next_fire(watermark) or now) <= now}
    assert due and {s.name for _, s in heap.pop_due(now).publish} == due
    async with turns() as counted:
        await marks.let_go(heap, schedules, {1}, 2)
    assert counted() >= 10
    assert not heap.pop_due(now + timedelta(minutes=1)).publish
