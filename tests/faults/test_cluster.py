"""A three-node cluster, quorum queues: nodes die, stop, freeze, restart and are cut off from
the majority (a partition: the node runs and serves its clients, its peers cannot reach it)
while tasks flow. On 3.10 ``pause_minority`` pauses a cut-off node and its clients move on;
on 4.3 (Khepri only, no partition handling) it stays up but can do nothing without the
majority: its worker idles, its scheduler gets no confirm.

The minority partition scenarios are in ``test_cluster_partitions.py``, on a cluster of
their own. The oracle is the ledger: every task published is completed or failed as its kind says,
none is lost, and a task that ran twice has a cause the ledger can name. Workers, schedulers
and the publisher are given every node (``CRON_AMQP_URL``, comma-separated).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.faults.cluster import (
    LONG_ATTEMPTS,
    TERM_START_SECONDS,
    back_if_locks_wait,
    cluster_scenario,
    first_node_url,
    flowing,
    locked_run,
    new_leader,
    nothing_lost,
    stepped_down_first,
    stop_schedulers,
    stuck_on_3_10,
    workers_on,
)
from tests.faults.harness import ClusterScenario
from tests.faults.test_scheduler_faults import (
    STANDING_BY,
    fires_report,
    more_fires,
    schedules_file,
    spawn_scheduler,
)
from warren_cron.faultkit.ledger import Fate, Ledger
from warren_cron.faultkit.private_broker import NET_TICKTIME_SECONDS
from warren_cron.faultkit.private_cluster import PrivateCluster
from warren_cron.faultkit.waits import eventually
from warren_cron.faultkit.workload import workload

pytestmark = [pytest.mark.faults, pytest.mark.cluster]


@pytest.fixture
async def scenario(
    whole: PrivateCluster, ledger: Ledger, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[ClusterScenario]:
    """A quorum-queue scenario on the cluster; its processes are killed afterwards."""
    async with cluster_scenario(whole, ledger, tmp_path, request.node) as made:
        yield made


async def test_workers_move_to_another_node_when_theirs_is_killed(
    scenario: ClusterScenario,
) -> None:
    """kill -9 of the node the workers use: they reconnect to the next node, nothing lost."""
    await scenario.prepare()
    victim = scenario.node.nodes[0]
    workers = await workers_on(scenario, victim)
    await flowing(scenario)
    await asyncio.to_thread(victim.kill)
    await nothing_lost(scenario, workers)


async def test_killing_the_main_queue_leader_loses_nothing(scenario: ClusterScenario) -> None:
    """kill -9 of the quorum leader of the main queue: a follower leads, nothing lost."""
    await scenario.prepare()
    leader = await asyncio.to_thread(scenario.node.queue_leader, scenario.names.main_queue)
    follower = next(node for node in scenario.node.nodes if node is not leader)
    workers = await workers_on(scenario, follower)
    await flowing(scenario)
    await asyncio.to_thread(leader.kill)
    with stuck_on_3_10(scenario):  # RabbitMQ 3.10 can leave tasks stuck; 4.0 passed
        await nothing_lost(scenario, workers)
    assert (
        await asyncio.to_thread(scenario.node.queue_leader, scenario.names.main_queue) is not leader
    )


async def test_a_node_stopped_and_started_again_rejoins(scenario: ClusterScenario) -> None:
    """A clean stop of the workers' node, then its start: it rejoins, nothing lost."""
    await scenario.prepare()
    node = scenario.node.nodes[1]
    workers = await workers_on(scenario, node)
    await flowing(scenario)
    await asyncio.to_thread(node.stop)
    await eventually(lambda: scenario.ledger.count_attempts() >= 30, 60)
    await asyncio.to_thread(node.start)
    await eventually(lambda: len(scenario.node.members()) == 3, 60)
    await nothing_lost(scenario, workers)


async def test_a_node_frozen_past_the_net_tick_time_loses_nothing(
    scenario: ClusterScenario,
) -> None:
    """kill -STOP of the workers' node past the net tick time (cut off from its peers), then
    -CONT: the workers move on, nothing is lost, and once the node is restarted (what a
    frozen node's partition needs, see ``PrivateCluster.heal``) the cluster is whole."""
    await scenario.prepare()
    node = scenario.node.nodes[2]
    workers = await workers_on(scenario, node)
    await flowing(scenario)
    node.freeze()
    try:
        await asyncio.sleep(NET_TICKTIME_SECONDS * 2)  # the others declare it down
    finally:
        node.thaw()
    await nothing_lost(scenario, workers)
    await asyncio.to_thread(scenario.node.heal)
    await eventually(scenario.node.whole, 120, interval=2)
    await nothing_lost(scenario, workers)


async def test_a_rolling_restart_while_tasks_flow_loses_nothing(
    scenario: ClusterScenario,
) -> None:
    """Each node in turn stopped and started while tasks are published: nothing lost."""
    await scenario.prepare()
    workers = [await scenario.worker() for _ in range(2)]
    publishing = asyncio.create_task(scenario.publish(workload(150, 11, seconds=0.1), rate=5))
    for node in scenario.node.nodes:
        await asyncio.to_thread(node.stop)
        await asyncio.to_thread(node.start)
        await eventually(lambda: len(scenario.node.members()) == 3, 60, interval=1)
    await publishing
    with stuck_on_3_10(scenario):
        await nothing_lost(scenario, workers)


async def test_a_standby_scheduler_leads_when_the_leaders_node_is_killed(
    scenario: ClusterScenario, tmp_path: Path
) -> None:
    """kill -9 of the leader's node, left down: the lock queue's majority drops the consumer
    it had there, a scheduler leads again within seconds through another node (the standby,
    or the old leader if it reconnects first), no fire is missing and none runs twice
    unseen."""
    await scenario.prepare()
    first, second = scenario.node.nodes[0], scenario.node.nodes[1]
    await scenario.worker(CRON_AMQP_URL=first_node_url(scenario.node, second))
    path = schedules_file(tmp_path)
    leader = await spawn_scheduler(scenario, path).ready()  # every node, the first first
    on_second = first_node_url(scenario.node, second)
    standby = await spawn_scheduler(scenario, path, STANDING_BY, CRON_AMQP_URL=on_second).ready()
    await more_fires(scenario)
    await asyncio.to_thread(first.kill)
    await new_leader(leader, standby)
    await more_fires(scenario)
    assert leader.alive()
    await stop_schedulers(leader, standby)
    report, times = await fires_report(scenario)
    assert (report.lost, report.unexpected) == ([], []), report.table()
    assert len(report.unexplained) <= 1, report.table()  # as above: the takeover's one fire
    assert len(times) >= 5


async def test_a_standby_scheduler_leads_when_the_leaders_node_is_cut_off(
    scenario: ClusterScenario, tmp_path: Path
) -> None:
    """The leader's node frozen past the net tick time: the others drop its consumer of the
    lock queue and a scheduler leads through another node while it stays frozen; the old
    leader, fenced with its node, publishes nothing twice unseen."""
    await scenario.prepare()
    first, second = scenario.node.nodes[0], scenario.node.nodes[1]
    on_second = first_node_url(scenario.node, second)
    await scenario.worker(CRON_AMQP_URL=on_second)
    path = schedules_file(tmp_path)
    leader = await spawn_scheduler(scenario, path).ready()  # on the first node
    standby = await spawn_scheduler(scenario, path, STANDING_BY, CRON_AMQP_URL=on_second).ready()
    await more_fires(scenario)
    first.freeze()
    try:
        stepped_down_first(leader, await new_leader(leader, standby))
        await more_fires(scenario, timeout=TERM_START_SECONDS)
    finally:
        first.thaw()
    await asyncio.to_thread(scenario.node.heal)
    await more_fires(scenario)
    await stop_schedulers(leader, standby)
    report, times = await fires_report(scenario)
    assert (report.lost, report.unexpected) == ([], []), report.table()
    # A takeover may repeat the one fire confirmed before the old leader stored its
    # watermark (at least once, as for a killed scheduler); never more than that one.
    assert len(report.unexplained) <= 1, report.table()
    assert len(times) >= 8


#: Lock holders whose lease is well under the nodes' net tick time, as docs/cluster.md asks
#: (the others see a silent node down after 6 to 10 s at 8 s): a frozen holder stops first.
LEASED = {**LONG_ATTEMPTS, "CRON_LOCK_LEASE_SECONDS": str(NET_TICKTIME_SECONDS * 3 / 8)}


@pytest.mark.usefixtures("long_consumer_timeout")
@pytest.mark.parametrize("fault", ["kill", "freeze"])
async def test_an_overlap_lock_held_on_a_lost_node_never_lets_two_runs_overlap(
    scenario: ClusterScenario, fault: str
) -> None:
    """The lock (an exclusive queue) lives on the holder's node: killed or cut off, the holder
    stops its attempt and the lock goes with the node (on 4.3, once the node is back); the
    redelivered run takes it on the other node, never while the first still runs, and
    completes."""
    await scenario.prepare()
    first, second = scenario.node.nodes[0], scenario.node.nodes[1]
    await workers_on(scenario, first, 1, **LEASED)
    run, kind = locked_run(20)
    await scenario.publish([(run, kind)])
    await eventually(lambda: scenario.ledger.count_attempts() >= 1, 30)
    await workers_on(scenario, second, 1, **LEASED)
    if fault == "kill":
        await asyncio.to_thread(first.kill)
    else:
        first.freeze()
    try:
        await back_if_locks_wait(first, frozen=fault == "freeze")
        await eventually(lambda: scenario.ledger.count_attempts() >= 2, 90, interval=0.5)
    finally:
        first.thaw()
    await asyncio.to_thread(scenario.node.heal)
    # A freeze moves quorum leaders: 3.10 stranded a retry once (its dead-letter worker).
    with stuck_on_3_10(scenario, retry_queues=fault == "freeze"):
        report = await scenario.check(timeout=120)
    assert report.runs[run.run_id].fate is Fate.COMPLETED, report.table()
    assert scenario.ledger.overlapping(run.run_id) == []
