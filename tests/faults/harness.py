"""What the fault tests add to a scenario: their broker helpers, assertions and waits."""

from __future__ import annotations

from dataclasses import dataclass

from tests.namespace import TestBroker
from warren_cron.faultkit.ledger import Report
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.private_cluster import PrivateCluster
from warren_cron.faultkit.processes import Proc
from warren_cron.faultkit.scenario import Scenario

#: How long a frozen broker stays frozen: aiormq gives up on a connection after
#: 3 x (heartbeat + 1) s without a frame, 9 s at the fault tests' 2 s heartbeat.
FREEZE_SECONDS = 14


class Judged(Scenario):
    """The fault tests' starts, waits and assertions, on a node or a cluster."""

    async def worker(self, **extra: str) -> Proc:
        """Start a worker process on the scenario's namespace and wait until it consumes."""
        return await self.spawn_worker(**extra).ready()

    async def check(self, timeout: float = 60) -> Report:
        """Settle, then assert nothing was lost, unexpected or duplicated without a cause."""
        report = await self.wait_quiet(timeout)
        assert report.lost == [], f"lost {report.lost}\n{report.table()}"
        assert report.unexpected == [], f"unexpected {report.unexpected}"
        assert report.unexplained == [], f"unexplained duplicates {report.unexplained}"
        return report


@dataclass
class FaultScenario(Judged):
    """A test's scenario on the private node: its namespace has the test broker's helpers."""

    node: PrivateBroker
    broker: TestBroker


@dataclass
class ClusterScenario(Judged):
    """A test's scenario on the private cluster, quorum queues, workers given every node."""

    node: PrivateCluster
    broker: TestBroker
