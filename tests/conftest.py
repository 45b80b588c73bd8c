"""Fixtures: a real broker, a namespace of its own per test, and workers that clean up."""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Literal, Protocol, TypeVar

import aio_pika
import pytest
from aio_pika.abc import AbstractChannel, AbstractConnection
from chaoslib.namespace import BrokerNamespace
from chaoslib.private_broker import PrivateBroker
from chaoslib.private_broker import available as private_broker_available
from chaoslib.waits import eventually

from tests.broker import (
    LOCAL_URL,
    container_url,
    delete_all,
    exchange_exists,
    local_names,
    reachable,
)
from topology.client import Client
from topology.declare import Topology, declare_topology
from topology.delay import delay_objects
from topology.names import FINAL_KEY
from topology.plan import RetryPlan
from topology.runtime.service import Service
from topology.schedules.schedule import Schedule
from worker.consumer import Worker
from worker.http import HttpHandler, http_options, new_session
from worker.monitor import Monitor, MonitorSettings
from worker.registry import Registry
from worker.settings import WorkerSettings


@pytest.fixture(scope="session")
def amqp_url() -> Iterator[str]:
    """URL of a real broker: CRON_TEST_AMQP_URL, else localhost:5672, else a container."""
    explicit = os.environ.get("CRON_TEST_AMQP_URL")
    if explicit:
        yield explicit
        return
    if reachable(LOCAL_URL):
        yield LOCAL_URL
        return
    with container_url() as url:
        if url is None:
            message = (
                "no RabbitMQ: set CRON_TEST_AMQP_URL, start one on localhost:5672 "
                "(rabbitmq-server -detached), or install Docker for testcontainers"
            )
            if os.environ.get("CI"):
                pytest.fail(message, pytrace=False)
            pytest.skip(message)
        yield url


#: Every namespace of this run starts with this, so one sweep at the end finds leftovers.
SESSION_PREFIX = f"t{uuid.uuid4().hex[:6]}_"


def _namespace(node: pytest.Item) -> str:
    slug = re.sub(r"[^a-z0-9]+", "_", node.name.lower())[:40]
    return f"{SESSION_PREFIX}{slug}_{uuid.uuid4().hex[:4]}"


#: The shared broker's URL once a test used it: only then is there anything to sweep.
_SHARED_USED: set[str] = set()


@pytest.fixture(scope="session", autouse=True)
def sweep_leftovers() -> Iterator[None]:
    """After the run, delete anything of this run's namespaces that a test left behind.

    It asks for no broker itself, so a run of broker-free tests needs none.
    """
    yield
    for url in _SHARED_USED:  # the session's one amqp_url, if a test used it
        queues = local_names(SESSION_PREFIX, "queues") or []
        exchanges = local_names(SESSION_PREFIX, "exchanges") or []
        if queues or exchanges:
            asyncio.run(delete_all(url, queues, exchanges))


class TestBroker(BrokerNamespace):
    """A test's namespace on the real broker, and helpers to look inside it."""

    __test__ = False

    def settings(self, **overrides: Any) -> WorkerSettings:
        """Worker settings for this namespace, with small timeouts for tests."""
        values: dict[str, Any] = {
            "namespace": self.names.namespace,
            "amqp_url": self.url,
            "queue_type": self.queue_type,
            "shutdown_grace_seconds": 5,
            "log_format": "console",
        }
        values.update(overrides)
        return WorkerSettings(**values)

    async def declare(self) -> Topology:
        """Declare the namespace's topology."""
        return await declare_topology(await self.channel(), self.names, self.settings())

    async def depth(self, queue: str) -> int:
        """Number of ready messages in ``queue``."""
        channel = await self.channel()
        declared = await channel.declare_queue(queue, passive=True)
        await channel.close()
        return declared.declaration_result.message_count or 0

    async def get_all(self, queue: str, *, ack: bool = False) -> list[Any]:
        """Every message now in ``queue``, requeued afterwards unless ``ack``."""
        channel = await self.channel()
        declared = await channel.declare_queue(queue, passive=True)
        messages = []
        while (message := await declared.get(fail=False, no_ack=ack)) is not None:
            messages.append(message)
        await channel.close()
        return messages

    async def reject_head(self, count: int = 1) -> None:
        """Take ``count`` messages from the main queue's head and reject them, as a failed
        attempt does: each moves on to the retry queue its routing key names."""
        channel = await self.channel()
        main = await channel.declare_queue(self.names.main_queue, passive=True)
        for _ in range(count):
            message = await main.get(timeout=5)
            assert message is not None, "the main queue is empty"
            await message.reject(requeue=False)
        await channel.close()

    async def wait_depth(self, queue: str, count: int, timeout: float = 10) -> None:
        """Wait until ``queue`` holds at least ``count`` ready messages."""

        async def deep() -> bool:
            return await self.depth(queue) >= count

        await eventually(deep, timeout, what=f"{count} message(s) in {queue}")

    async def cleanup(self) -> None:
        """Delete the namespace's queues and exchanges (the session sweep finds any other)."""
        names = self.names
        queues = [names.main_queue, names.failed_queue, names.monitor_queue]
        queues += [names.leader_queue, names.watermark_queue]
        queues += [names.history_stream, names.control_stream, names.status_queue]
        queues += [names.retry_queue(key) for key in self.plan_keys]
        exchanges = [names.tasks_exchange, names.dlx, names.unrouted_exchange]
        if await exchange_exists(self.url, names.delay_deliver_exchange):
            delay_queues, delay_exchanges = delay_objects(names, {*self.plan_keys, FINAL_KEY})
            queues += delay_queues
            exchanges += delay_exchanges
        await delete_all(self.url, queues, exchanges)


Node = Literal["shared", "private"]


@pytest.fixture
def node() -> Node:
    """Where ``broker`` makes its namespace: the machine's shared broker, or (``"private"``)
    the run's own node, which tests stop, kill and freeze. tests/faults/ overrides it; a test
    picks with ``@pytest.mark.parametrize("node", [...])``, both to run on each."""
    return "shared"


@pytest.fixture
async def broker(node: Node, request: pytest.FixtureRequest) -> AsyncIterator[TestBroker]:
    """A namespace of the test's own on a real broker (see ``node``), deleted afterwards."""
    name: dict[str, Any] = {"connection_name": f"test:{request.node.name}"}
    connection: AbstractConnection
    if node == "private":
        private: PrivateBroker = request.getfixturevalue("private_broker")
        url = private.url
        # Robust: the tests restart the node under it.
        connection = await aio_pika.connect_robust(url, client_properties=name)
    else:
        url = request.getfixturevalue("amqp_url")
        _SHARED_USED.add(url)
        connection = await aio_pika.connect(url, client_properties=name)
    test_broker = TestBroker(url, _namespace(request.node), connection)
    try:
        yield test_broker
    finally:
        if node == "private":
            private.start()  # a test that stopped it leaves it running for the clean-up
        await connection.close()
        await test_broker.cleanup()


@pytest.fixture
async def client(broker: TestBroker) -> AsyncIterator[Client]:
    """A client on the test's namespace; its default plan's queues are deleted afterwards."""
    settings = broker.settings()
    broker.plan_keys.update(step.key for step in settings.default_plan().suffixes())
    async with Client(settings) as opened:
        yield opened


@pytest.fixture
async def confirming(broker: TestBroker) -> AsyncIterator[AbstractChannel]:
    """A channel with publisher confirms where returns raise, as the scheduler's."""
    channel = await broker.connection.channel(publisher_confirms=True, on_return_raises=True)
    yield channel
    if not channel.is_closed:
        await channel.close()


class ReadyService(Service, Protocol):
    """A service that says when it consumes (worker, monitor)."""

    ready: asyncio.Event


class InProcess:
    """Services (workers, monitors) run as tasks of the test's event loop, stopped together."""

    def __init__(self, start_timeout: float) -> None:
        self._start_timeout = start_timeout
        self._started: list[tuple[ReadyService, asyncio.Task[None]]] = []

    async def start(self, service: ServiceT) -> ServiceT:
        """Run ``service`` and wait until it is ready (or raise why it could not start)."""
        task = asyncio.create_task(service.run())
        self._started.append((service, task))
        ready = asyncio.create_task(service.ready.wait())
        await asyncio.wait(
            {ready, task}, timeout=self._start_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if task.done():
            ready.cancel()
            task.result()
        return service

    async def stop_all(self, timeout: float) -> None:
        """Stop every service started and wait for each to finish."""
        for service, task in self._started:
            service.stop()
            await asyncio.wait_for(task, timeout)


ServiceT = TypeVar("ServiceT", bound=ReadyService)


class InProcessWorkers(InProcess):
    """Workers run in-process, with settings from ``settings``."""

    def __init__(self, settings: Callable[..., WorkerSettings], start_timeout: float) -> None:
        super().__init__(start_timeout)
        self._settings = settings

    async def start_worker(self, registry: Registry | None = None, **overrides: Any) -> Worker:
        """Start a worker and wait until it consumes (or raise why it could not)."""
        return await self.start(Worker(self._settings(**overrides), registry))


@pytest.fixture
async def run_worker(broker: TestBroker) -> AsyncIterator[Any]:
    """Start in-process workers on the test's namespace; all are stopped afterwards."""
    workers = InProcessWorkers(broker.settings, start_timeout=15)
    yield workers.start_worker
    await workers.stop_all(timeout=30)


@pytest.fixture
async def run_monitor(broker: TestBroker) -> AsyncIterator[Any]:
    """Start in-process monitors on the test's namespace (alerts at once, no grouping wait);
    all are stopped afterwards."""
    monitors = InProcess(start_timeout=15)

    async def start(
        clock: Callable[[], float] = time.monotonic,
        schedules: Sequence[Schedule] = (),
        **overrides: Any,
    ) -> Monitor:
        values: dict[str, Any] = {
            "namespace": broker.names.namespace,
            "amqp_url": broker.url,
            "queue_type": broker.queue_type,
            "log_format": "console",
            "alert_group_wait_seconds": 0,
            "alert_min_interval_seconds": 0,
        }
        settings = MonitorSettings(**{**values, **overrides})
        monitor = Monitor(settings, schedules=schedules, clock=clock, retry_base_seconds=0.05)
        return await monitors.start(monitor)

    yield start
    await monitors.stop_all(timeout=30)


@pytest.fixture
async def spawn() -> AsyncIterator[Any]:
    """Start project processes (tests.scheduling.Spawner); any still running is killed."""
    from tests.scheduling import Spawner  # it imports this module: import when used

    spawner = Spawner()
    yield spawner
    await spawner.kill_all()


@pytest.fixture
async def schedulers(broker: TestBroker) -> AsyncIterator[Any]:
    """Start schedulers in-process (tests.scheduling.Schedulers); all are stopped afterwards."""
    from tests.scheduling import Schedulers  # it imports this module: import when used

    started = Schedulers(broker)
    yield started
    for instance, _ in list(started.tasks.values()):
        await started.stop(instance)


def plan(*delays_ms: int) -> RetryPlan:
    """Shorthand for a retry plan."""
    return RetryPlan(tuple(delays_ms))


@pytest.fixture(scope="session")
def private_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateBroker]:
    """A RabbitMQ node of this test run's own, removed at the end of the run."""
    if not private_broker_available():
        message = "rabbitmq-server is not installed: fault tests need a private node"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    node = PrivateBroker(tmp_path_factory.mktemp("rabbitmq"))
    node.start()
    try:
        yield node
    finally:
        node.remove()


@pytest.fixture
def private_broker(private_node: PrivateBroker) -> Iterator[PrivateBroker]:
    """The private node, running and thawed before and after the test."""
    private_node.thaw()
    private_node.start()
    yield private_node
    private_node.thaw()
    private_node.start()


@pytest.fixture
async def http_handler() -> AsyncIterator[Callable[..., HttpHandler]]:
    """Makes http handlers as a worker with these settings has; sessions closed afterwards."""
    sessions = []

    def make(**settings: Any) -> HttpHandler:
        options = http_options(WorkerSettings(**settings))
        sessions.append(new_session(options.policy))
        return HttpHandler(sessions[-1], options)

    yield make
    for session in sessions:
        await session.close()
