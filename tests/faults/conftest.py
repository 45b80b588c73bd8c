"""Fixtures of the fault tests: a scenario on the private node, its ledger and its processes;
the private cluster of the cluster tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Node
from tests.faults.harness import FaultScenario
from tests.inprocess import InProcessWorkers
from tests.namespace import TestBroker
from warren_cron.faultkit.install import available as private_broker_available
from warren_cron.faultkit.ledger import Ledger
from warren_cron.faultkit.private_broker import CONSUMER_TIMEOUT_MS, PrivateBroker
from warren_cron.faultkit.private_cluster import PrivateCluster
from warren_cron.faultkit.processes import Procs, base_env


@pytest.fixture
def node() -> Node:
    """Fault tests break their broker: each runs on the run's private node."""
    return "private"


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    """A fresh ledger file for the test."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    yield ledger
    ledger.close()


@pytest.fixture
def procs(tmp_path: Path, broker: TestBroker, ledger: Ledger) -> Iterator[Procs]:
    """Project processes on the test's namespace of the private node; killed at the end."""
    env = base_env(broker.url, broker.names.namespace, ledger.path)
    started = Procs(tmp_path, env)
    yield started
    started.kill_all()


@pytest.fixture
async def scenario(
    private_broker: PrivateBroker, broker: TestBroker, ledger: Ledger, procs: Procs
) -> AsyncIterator[FaultScenario]:
    """A scenario whose topology is declared lazily by ``prepare()``; closed afterwards."""
    made = FaultScenario(private_broker, broker, ledger, procs)
    yield made
    procs.kill_all()
    await made.close()


def private_worker_settings(broker: TestBroker, **overrides: Any) -> Any:
    """Settings of an in-process worker on the private node, with its short timeouts."""
    values: dict[str, Any] = {
        "heartbeat_seconds": 2,
        "consumer_timeout_seconds": 4,
        "task_timeout_seconds": 3,
        "shutdown_grace_seconds": 1,
    }
    return broker.settings(**{**values, **overrides})


@pytest.fixture
async def run_private_worker(broker: TestBroker) -> AsyncIterator[Any]:
    """Start in-process workers on the private node; all are stopped afterwards."""
    workers = InProcessWorkers(partial(private_worker_settings, broker), start_timeout=30)
    yield workers.start_worker
    await workers.stop_all(timeout=60)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateCluster]:
    """Three joined nodes of the run's release, removed after the module's tests."""
    if not private_broker_available():
        pytest.fail("rabbitmq-server is not installed: cluster tests need private nodes")
    made = PrivateCluster(tmp_path_factory.mktemp("cluster"))
    try:
        made.start()
        yield made
    finally:
        made.remove()


@pytest.fixture
def whole(cluster: PrivateCluster) -> Iterator[PrivateCluster]:
    """The cluster with every node running, thawed and joined, before and after the test."""
    for node in cluster.nodes:
        node.thaw()
    cluster.heal()
    yield cluster
    for node in cluster.nodes:
        node.thaw()
    cluster.heal()


@pytest.fixture
def long_consumer_timeout(whole: PrivateCluster) -> Iterator[None]:
    """Channels opened meanwhile take 120 s to time a consumer out, for workers started with
    ``tests.faults.cluster.LONG_ATTEMPTS``."""
    whole.set_consumer_timeout(120_000)
    yield
    whole.set_consumer_timeout(CONSUMER_TIMEOUT_MS)
