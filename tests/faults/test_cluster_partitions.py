"""A minority partition on a three-node cluster of its own (``tests/faults/test_cluster.py``
has the other cluster scenarios): one node cut off from its peers while it runs and serves its
clients. On 4.3 (Khepri, no partition handling) the cut-off node can do nothing without the
majority: its worker idles, its scheduler gets no probe back and steps down.

A cluster of their own: on 4.3, a node killed and started again in an earlier scenario came
back without its member of the stream coordinator (``ra:members`` answered ``noproc``), and a
partition cutting off a second node then left the majority's streams unavailable until it
rejoined (docs/rabbitmq-4.3.md).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.faults.cluster import (
    TERM_START_SECONDS,
    cluster_scenario,
    confirmed_nothing_once_taken_over,
    first_node_url,
    flowing,
    new_leader,
    nothing_lost,
    stop_schedulers,
    workers_on,
)
from tests.faults.harness import ClusterScenario
from tests.faults.test_partition_faults import LEADING, every_second_ran, leads, spread
from tests.faults.test_partition_faults import schedules_file as partition_schedules
from tests.faults.test_partition_faults import spawn_scheduler as spawn_partitioned
from tests.faults.test_scheduler_faults import (
    STANDING_BY,
    fires_report,
    more_fires,
    schedules_file,
    spawn_scheduler,
)
from warren_cron.faultkit.install import release
from warren_cron.faultkit.ledger import Ledger
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.private_cluster import PrivateCluster
from warren_cron.faultkit.waits import eventually
from warren_cron.faultkit.workload import workload
from warren_cron.scheduler.shares import partition_of

pytestmark = [pytest.mark.faults, pytest.mark.cluster]


@pytest.fixture
async def scenario(
    whole: PrivateCluster, ledger: Ledger, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[ClusterScenario]:
    """A quorum-queue scenario on the cluster; its processes are killed afterwards."""
    async with cluster_scenario(whole, ledger, tmp_path, request.node) as made:
        yield made


@contextmanager
def cut_off(cluster: PrivateCluster, node: PrivateBroker) -> Iterator[None]:
    """``node`` in a minority partition for the block; rejoined (and healed) after it."""
    cluster.isolate(node)
    try:
        yield
    finally:
        cluster.rejoin(node)


#: The partition scenarios hold on 4.3 (Khepri: the cut-off node keeps its clients and can do
#: nothing). On 3.10, pause_minority pauses the cut-off node and, with the peers' links cut as
#: these tests cut them, the node had not rejoined after 120 s, and the standby took the lock
#: while the old leader still held its own on the minority side: to be worked out before they
#: run there (docs/rabbitmq-4.3.md).
PARTITIONS_ON_4_3_ONLY = pytest.mark.skipif(
    release() != "4.3", reason="partition scenarios verified on RabbitMQ 4.3 only so far"
)


@PARTITIONS_ON_4_3_ONLY
async def test_a_worker_cut_off_with_its_node_loses_and_doubles_nothing(
    scenario: ClusterScenario,
) -> None:
    """A worker on the minority node, another on the majority: while cut off, the majority's
    worker goes on with the tasks, new ones too; once the node rejoins, nothing is lost or
    doubled."""
    await scenario.prepare()
    first, cut = scenario.node.nodes[0], scenario.node.nodes[2]
    workers = [*await workers_on(scenario, cut, 1), *await workers_on(scenario, first, 1)]
    await flowing(scenario)
    with cut_off(scenario.node, cut):
        await eventually(lambda: cut.node not in scenario.node.members(), 60, interval=0.5)
        done = scenario.ledger.count_attempts()
        # Tasks published during the cut (through the majority): the first workload may be
        # nearly done by the time the majority sees the node gone.
        await scenario.publish(workload(20, 13, seconds=0.1))
        await eventually(lambda: scenario.ledger.count_attempts() >= done + 10, 60)
    await eventually(scenario.node.whole, 120, interval=2)
    await nothing_lost(scenario, workers)


@PARTITIONS_ON_4_3_ONLY
async def test_a_leading_scheduler_cut_off_with_its_node_fires_nothing_twice(
    scenario: ClusterScenario, tmp_path: Path
) -> None:
    """The leading scheduler's node in a minority partition. On 3.10 the node pauses and a
    scheduler on the majority leads; on 4.3 the majority keeps the old leader's lock, and the
    old leader, cut off, gets no fire confirmed. Once the node rejoins, fires go on: none is
    lost and none runs twice unseen."""
    await scenario.prepare()
    first, cut = scenario.node.nodes[0], scenario.node.nodes[2]
    await scenario.worker(CRON_AMQP_URL=first_node_url(scenario.node, first))
    path = schedules_file(tmp_path)
    on_cut = first_node_url(scenario.node, cut)
    leader = await spawn_scheduler(scenario, path, CRON_AMQP_URL=on_cut).ready()
    on_first = first_node_url(scenario.node, first)
    standby = await spawn_scheduler(scenario, path, STANDING_BY, CRON_AMQP_URL=on_first).ready()
    await more_fires(scenario)
    with cut_off(scenario.node, cut):
        await eventually(lambda: cut.node not in scenario.node.members(), 60, interval=0.5)
        # The majority may drop the cut node's consumer before the old leader's lease runs
        # out (seen on 4.3: the standby led 0.8 s into the cut): two schedulers then believe
        # they lead for up to a lease, and the cut-off one must get nothing confirmed.
        confirmed_nothing_once_taken_over(leader, await new_leader(leader, standby))
        await more_fires(scenario, 5, timeout=TERM_START_SECONDS)
    await eventually(scenario.node.whole, 120, interval=2)
    await more_fires(scenario)
    await stop_schedulers(leader, standby)
    report, times = await fires_report(scenario)
    assert (report.lost, report.unexpected) == ([], []), report.table()
    # As for any takeover: at most the one fire confirmed before the old leader's watermark.
    assert len(report.unexplained) <= 1, report.table()
    assert len(times) >= 8


@PARTITIONS_ON_4_3_ONLY
async def test_a_scheduler_cut_off_with_its_partitions_hands_them_over_and_takes_its_share_back(
    scenario: ClusterScenario, tmp_path: Path
) -> None:
    """Two schedulers split 8 partitions, one of them on the node then cut off: the other
    leads all 8 while it is, they spread again once the node rejoins, and every schedule ran
    every second throughout; a repeat only of a schedule whose partition moved."""
    await scenario.prepare()
    first, cut = scenario.node.nodes[0], scenario.node.nodes[2]
    await scenario.worker(CRON_AMQP_URL=first_node_url(scenario.node, first))
    path = partition_schedules(tmp_path)
    stays = await spawn_partitioned(
        scenario, path, CRON_AMQP_URL=first_node_url(scenario.node, first)
    ).ready()
    goes = spawn_partitioned(scenario, path, CRON_AMQP_URL=first_node_url(scenario.node, cut))
    await eventually(lambda: spread([stays, goes]), 60, what="8 partitions over 2")
    moved = leads(goes)
    terms = goes.count(LEADING)
    with cut_off(scenario.node, cut):
        await eventually(lambda: cut.node not in scenario.node.members(), 60, interval=0.5)
        await eventually(lambda: len(leads(stays)) == 8, TERM_START_SECONDS, what="all on one")
        await more_fires(scenario, 16, timeout=TERM_START_SECONDS)
    await eventually(scenario.node.whole, 120, interval=2)
    await goes.wait_log(LEADING, count=terms + 1, timeout=TERM_START_SECONDS)
    await eventually(lambda: spread([stays, goes]), 60, what="8 partitions over 2 again")
    await more_fires(scenario, 32)
    await stop_schedulers(stays, goes)
    report, _ = await every_second_ran(scenario)
    repeated = {run_id.split("@", 1)[0] for run_id in report.unexplained}
    assert {partition_of(name, 8) for name in repeated} <= moved, report.table()
