"""Fixtures: a real broker, a namespace of its own per test, and workers that clean up."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import aio_pika
import pytest
from aio_pika.abc import AbstractChannel, AbstractConnection

from tests.broker import LOCAL_URL, container_url, delete_all, local_names, reachable
from tests.inprocess import InProcess, InProcessWorkers
from tests.namespace import SESSION_PREFIX, TestBroker, namespace_for
from warren_cron.client import Client
from warren_cron.faultkit.install import available as private_broker_available
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.monitor import Monitor, MonitorSettings
from warren_cron.plan import RetryPlan
from warren_cron.schedules.schedule import Schedule
from warren_cron.worker.http import HttpHandler, http_options, new_session
from warren_cron.worker.settings import WorkerSettings


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


#: Fixtures that reach a real broker: a test that uses one is a broker test, marked or not.
BROKER_FIXTURES = frozenset({"amqp_url", "broker", "client", "private_broker", "private_node"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``broker`` every test that uses a broker fixture: runs that only repeat the broker
    tests on another release (CI's 4.3 lane) select them by that mark. Tests marked ``long``
    go first: started last, one would keep its process busy after the others ran out of
    work (the test processes steal what is left from each other, never a running test)."""
    for item in items:
        if BROKER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.broker)
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


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
    test_broker = TestBroker(url, namespace_for(request.node), connection)
    try:
        yield test_broker
    finally:
        if node == "private":
            private.serving()  # a test that stopped or broke it leaves it serving the clean-up
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
async def api(
    broker: TestBroker, run_monitor: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Any]:
    """The HTTP API of a running monitor with a token of each role (tests.api), and a client."""
    from tests.api import served_api  # it imports this module: import when used

    async with served_api(broker, run_monitor, tmp_path, monkeypatch) as served:
        yield served


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    """Headless Chromium; a machine without it fails the test (scripts/test.sh installs it)."""
    from playwright.async_api import async_playwright  # the browser tests' only

    from tests.dashboard import CHROMIUM

    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (scripts/test.sh does)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield launched
        await launched.close()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    """A fresh browser tab (its own cookies)."""
    context = await browser.new_context(viewport={"width": 1400, "height": 900})
    yield await context.new_page()
    await context.close()


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
    """The private node, running, thawed and letting logins in before and after the test
    (made anew if its vhost stays down: ``PrivateBroker.serving``)."""
    private_node.thaw()
    private_node.serving()
    yield private_node
    private_node.thaw()
    private_node.serving()


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
