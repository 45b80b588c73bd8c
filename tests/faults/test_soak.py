"""A soak: a worker, a scheduler and a monitor through broker restarts and a worker kill keep
their channels, memory and file descriptors level.

``WARREN_SOAK_RESTARTS`` (3) and ``WARREN_SOAK_FIRES`` (3: fires run between two restarts, one
a second) set the length: about 30 s by default (CI); ``WARREN_SOAK_RESTARTS=60
WARREN_SOAK_FIRES=50`` soaks for about an hour by hand. After each restart every process must
come back to the channels it held before the first one; after a warm-up restart, resident
memory and open files may grow only by a bound per restart that a leak of a channel or a
connection per restart exceeds.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.faults.harness import FaultScenario
from tests.faults.test_scheduler_faults import schedules_file, spawn_scheduler
from warren_cron.broker.connect import connect
from warren_cron.broker.exclusive import consumer_count
from warren_cron.broker.inspect import counts
from warren_cron.errors import BROKER_TROUBLE
from warren_cron.faultkit.private_broker import free_port
from warren_cron.faultkit.processes import Proc
from warren_cron.faultkit.waits import NeverHappened, eventually, progressing
from warren_cron.history.events import event
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.worker.parking import parked_count

pytestmark = pytest.mark.faults

RESTARTS = int(os.environ.get("WARREN_SOAK_RESTARTS", "3"))
FIRES = int(os.environ.get("WARREN_SOAK_FIRES", "3"))
#: Resident memory a process may gain per restart after the warm-up (kB), and at least.
RSS_PER_RESTART_KB = 1_500
RSS_FLOOR_KB = 6_000
#: Open files a process may hold more than after the warm-up (a connection being reopened).
FD_SLACK = 3
#: Every connection of the node with its client's port and its channels, as "port channels "
#: pairs (connections still opening have no port yet and are left out).
CONNECTIONS = (
    'lists:flatten([[integer_to_list(P), " ", integer_to_list(C), " "] ||'
    " I <- rabbit_networking:connection_info_all([peer_port, channels]),"
    " {peer_port, P} <- [lists:keyfind(peer_port, 1, I)], is_integer(P),"
    " {channels, C} <- [lists:keyfind(channels, 1, I)], is_integer(C)])."
)


@dataclass(frozen=True)
class Reading:
    """What one process holds: channels on the node, resident memory (kB), open files."""

    channels: int
    rss_kb: int
    fds: int


def local_ports(pid: int) -> set[int]:
    """The local TCP ports of the sockets ``pid`` holds open."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def rss_kb(pid: int) -> int:
    """Resident memory of ``pid`` (kB)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


async def readings(scenario: FaultScenario, procs: dict[str, Proc]) -> dict[str, Reading]:
    """A reading of each process; its channels are those of its connections to the node."""
    found = {}
    for name, proc in procs.items():
        held = await channels_of(scenario, proc.pid)
        found[name] = Reading(held, rss_kb(proc.pid), len(os.listdir(f"/proc/{proc.pid}/fd")))
    return found


async def channels_of(scenario: FaultScenario, pid: int) -> int:
    """The channels ``pid`` holds on the node, over all its connections."""
    words = (await asyncio.to_thread(scenario.node.call, CONNECTIONS)).strip('"').split()
    channels = {int(port): int(count) for port, count in zip(words[::2], words[1::2], strict=True)}
    return sum(channels.get(port, 0) for port in local_ports(pid))


async def channels_back(
    scenario: FaultScenario, procs: dict[str, Proc], baseline: dict[str, int]
) -> dict[str, Reading]:
    """Wait until every process holds its baseline's channels again; the readings then."""
    last: dict[str, Reading] = {}

    async def level() -> bool:
        nonlocal last
        last = await readings(scenario, procs)
        return all(last[name].channels == baseline[name] for name in procs)

    try:
        await eventually(level, 60, interval=0.5)
    except NeverHappened:
        held = {name: reading.channels for name, reading in last.items()}
        raise NeverHappened(f"channels {held}, not back to {baseline}") from None
    return last


async def settled_channels(scenario: FaultScenario, procs: dict[str, Proc]) -> dict[str, int]:
    """Each process's channels once three readings in a row agree (starts open and close
    short-lived ones)."""
    seen: list[dict[str, int]] = []

    async def steady() -> bool:
        now = await readings(scenario, procs)
        seen.append({name: reading.channels for name, reading in now.items()})
        return len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3]

    await eventually(steady, 60, what="steady channels", interval=1.0)
    return seen[-1]


async def restart_node(scenario: FaultScenario, worker: Proc) -> None:
    """Stop and start the node, then wait until the worker ran ``FIRES`` fires again (for as
    long as they keep coming: a minute without one fails)."""
    await asyncio.to_thread(scenario.node.stop)
    await asyncio.to_thread(scenario.node.start)
    ran = scenario.ledger.count_attempts()
    await progressing(
        scenario.ledger.count_attempts, lambda now: now >= ran + FIRES, 60, what="fires again"
    )
    assert worker.alive(), worker.log()[-3000:]


async def start_all(scenario: FaultScenario, tmp_path: Path) -> dict[str, Proc]:
    """A worker, a leading scheduler of a one-second schedule, a monitor with its pages."""
    await scenario.prepare()
    worker = await scenario.worker()
    scheduler = await spawn_scheduler(scenario, schedules_file(tmp_path)).ready()
    monitor = await scenario.procs.spawn(
        ["-m", "warren_cron.monitor"],
        '"monitor started"',
        **scenario.worker_env(),
        CRON_DASHBOARD_PORT=str(free_port()),
    ).ready()
    return {"worker": worker, "scheduler": scheduler, "monitor": monitor}


def assert_bounded(start: dict[str, Reading], end: dict[str, Reading], restarts: int) -> None:
    """Memory and open files grew no more than the bound for ``restarts`` restarts."""
    allowed = max(RSS_FLOOR_KB, RSS_PER_RESTART_KB * restarts)
    grown = {name: end[name].rss_kb - start[name].rss_kb for name in end}
    assert all(kb <= allowed for kb in grown.values()), f"RSS grew (kB): {grown} > {allowed}"
    fds = {name: (start[name].fds, end[name].fds) for name in end}
    assert all(b <= a + FD_SLACK for a, b in fds.values()), f"open files grew: {fds}"


@pytest.mark.long
async def test_restarts_and_a_worker_kill_leave_channels_memory_and_files_level(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """After each broker restart every process holds its first channels again; past a warm-up
    restart, RSS and open files stay within a bound (a worker is killed and replaced once)."""
    procs = await start_all(scenario, tmp_path)
    baseline = await settled_channels(scenario, procs)
    await restart_node(scenario, procs["worker"])
    warm = await channels_back(scenario, procs, baseline)
    for restart in range(1, max(RESTARTS, 2)):
        if restart == 1:  # one worker killed: its successor gets a baseline of its own
            procs["worker"].kill()
            procs["worker"] = await scenario.worker()
            fresh = await settled_channels(scenario, {"worker": procs["worker"]})
            baseline["worker"] = fresh["worker"]
        await restart_node(scenario, procs["worker"])
        now = await channels_back(scenario, procs, baseline)
        print(f"after restart {restart + 1}: {now}")  # shown when the test fails
        if restart == 1:
            warm["worker"] = now["worker"]
        assert_bounded(warm, now, restart)
    assert all(proc.alive() for proc in procs.values())


async def level_again(scenario: FaultScenario, held: int) -> None:
    """Wait until this test process holds ``held`` channels again (a restore may lag)."""
    now = held

    async def level() -> bool:
        nonlocal now
        now = await channels_of(scenario, os.getpid())
        return now == held

    try:
        await eventually(level, 30, interval=0.5)
    except NeverHappened:
        raise NeverHappened(f"{now} channels held, not {held}") from None


async def fails_in_an_outage(scenario: FaultScenario, publisher: HistoryPublisher) -> None:
    """Stop the node and emit an event: its write fails, and it is dropped."""
    dropped = publisher.dropped
    await asyncio.to_thread(scenario.node.stop)
    publisher.emit(event("fired", schedule="during"))
    await eventually(lambda: publisher.dropped > dropped, 30, what="a write failed")


async def published_again(publisher: HistoryPublisher) -> None:
    """Emit an event every half second until one is published (a stream just restarted may
    refuse the first ones)."""
    sent = publisher.published

    def again() -> bool:
        publisher.emit(event("fired", schedule="after"))
        return publisher.published > sent

    await eventually(again, 60, what="published again", interval=0.5)


@asynccontextmanager
async def publishing_history(
    scenario: FaultScenario,
) -> AsyncIterator[tuple[HistoryPublisher, int]]:
    """A history publisher on a robust connection of its own that has published one event,
    and the channels this test process holds then; closed after the block."""
    connection = await connect(scenario.settings(), "warren-test-history")
    publisher = HistoryPublisher(scenario.names, scenario.settings(), "test", metrics=False)
    await publisher.start(connection)
    try:
        publisher.emit(event("fired", schedule="before"))
        await eventually(lambda: publisher.published == 1, 30)
        yield publisher, await channels_of(scenario, os.getpid())
    finally:
        await publisher.close()
        await connection.close()


async def test_a_history_write_failed_in_an_outage_leaves_no_channel_behind(
    scenario: FaultScenario,
) -> None:
    """Events emitted while the broker is down are dropped; once it is back the publisher
    holds one channel again, not one more per outage."""
    async with publishing_history(scenario) as (publisher, held):
        for _ in range(2):
            await fails_in_an_outage(scenario, publisher)
            await asyncio.to_thread(scenario.node.start)
            await published_again(publisher)
            await level_again(scenario, held)


async def test_broker_calls_failed_in_an_outage_leave_no_channel_to_reopen(
    scenario: FaultScenario,
) -> None:
    """A queue count, a consumer count and a parked count asked while the node is down fail;
    once the robust connection is back it holds no channel for them (it reopened each)."""
    connection = await connect(scenario.settings(), "warren-test-calls")
    try:
        held = await channels_of(scenario, os.getpid())
        # Stopped with the event loop held: each call then starts before the connection
        # knows it is lost, as a check under way when the node goes does.
        scenario.node.stop()
        for call in (counts, consumer_count, parked_count):
            with pytest.raises((*BROKER_TROUBLE, RuntimeError)):
                await call(connection, "warren-test-absent")
        await asyncio.to_thread(scenario.node.start)
        await asyncio.wait_for(connection.ready(), 60)
        await level_again(scenario, held)
    finally:
        await connection.close()
