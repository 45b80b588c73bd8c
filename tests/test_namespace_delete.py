"""``warren namespace delete``: every queue, stream and exchange of one namespace listed, then
deleted, and nothing of its neighbours, also those whose names start the same; refused while
a worker is connected. On a node of the run's own with its management API."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from aiormq.exceptions import ChannelNotFoundEntity

from tests.conftest import Node
from tests.failed_records import run_warren
from tests.namespace import TestBroker
from warren_cron.broker.management import Management
from warren_cron.client import Client
from warren_cron.faultkit.install import available
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.waits import eventually
from warren_cron.history.stream import declare_history
from warren_cron.names import Names
from warren_cron.ops.namespace_shapes import owned
from warren_cron.store.admin import ScheduleAdmin

pytestmark = pytest.mark.broker
#: The namespaces beside ``acc``: one it is a prefix of, and two whose names have the shape
#: of ``acc``'s per-key queues (``acc_key.<digest>``, ``acc_lock.<schedule>``).
NEIGHBOURS = ("acc2", "acc_key.x", "acc_lock.y")
#: A plan only the runtime store names: without the management API it is found there.
STORED_PLAN = "7s-21s"


@pytest.fixture(scope="module")
def private_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateBroker]:
    """A private node running the management plugin, for this module's tests."""
    if not available():
        pytest.fail("rabbitmq-server is not installed: these tests need a private node")
    node = PrivateBroker(tmp_path_factory.mktemp("namespaces"), management=True)
    node.start(timeout=120)
    try:
        yield node
    finally:
        node.remove()


@pytest.fixture
def node() -> Node:
    """Every test here runs on the private node: its management API lists the namespaces."""
    return "private"


async def populate(broker: TestBroker, namespace: str) -> None:
    """Namespace ``namespace`` as warren leaves it: a worker's topology, a delayed task with an
    idempotency key, the runtime store with a schedule of its own plan, the history stream,
    a crash mark, a rate window and four partitions' locks and watermarks."""
    settings = broker.settings(namespace=namespace)
    async with Client(settings) as client:
        await client.enqueue("job", delay=600, key="once", plan=STORED_PLAN)
    admin = ScheduleAdmin(settings)
    await admin.start(broker.connection)
    retry = {"max_retries": 2, "delay_ms": 7000, "multiplier": 3}
    await admin.create({"name": "nightly", "every": "1h", "task": "job", "retry": retry}, "t")
    await admin.close()
    await declare_history(broker.connection, Names(namespace), settings)
    channel = await broker.channel()
    for name in (Names(namespace).crash_queue("c" * 32), Names(namespace).rate_window("d" * 16)):
        await channel.declare_queue(name, durable=True)
    # A fleet's partitions (CRON_SCHEDULER_PARTITIONS=4), which the command is not told of.
    for name in Names(namespace).partition_queues(4):
        await channel.declare_queue(name, durable=True)
    await channel.close()


async def listing(node: PrivateBroker) -> tuple[list[str], list[str]]:
    """Every queue and exchange on the node, as its management API lists them."""
    api = Management(str(node.management_url), "/", ("guest", "guest"))
    return await api.names("queues"), await api.names("exchanges")


def expected(base: str, namespace: str, names: list[str]) -> set[str]:
    """The names of ``namespace``'s objects, knowing which namespaces the test made: those
    starting with it, less those starting with a longer namespace of the test's."""
    longer = [f"{base}{n}_" for n in NEIGHBOURS if f"{base}{n}".startswith(namespace + "_")]
    return {
        name
        for name in names
        if name.startswith(f"{namespace}_") and not name.startswith(tuple(longer))
    }


async def exists(broker: TestBroker, name: str, kind: str) -> bool:
    """Whether queue or exchange ``name`` exists, by a passive declare."""
    channel = await broker.channel()
    try:
        if kind == "exchange":
            await channel.declare_exchange(name, passive=True)
        else:
            await channel.declare_queue(name, passive=True)
    except ChannelNotFoundEntity:
        return False
    await channel.close()
    return True


async def delete(broker: TestBroker, *args: str) -> subprocess.CompletedProcess[str]:
    """``warren namespace delete ARGS`` (in a thread: the test's in-process worker runs on)."""
    return await asyncio.to_thread(run_warren, broker, "namespace", "delete", *args)


def report(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The ``--json`` report of a run."""
    assert done.stdout, done.stderr
    found: dict[str, Any] = orjson.loads(done.stdout)
    return found


def names_in(found: dict[str, Any]) -> set[str]:
    """The names of the objects a report lists."""
    return {item["name"] for item in found["objects"]}


async def populated(broker: TestBroker, node: PrivateBroker) -> tuple[str, list[str], list[str]]:
    """``acc`` and its neighbours made; ``acc``'s name and the node's queues and exchanges."""
    base = broker.names.namespace
    for namespace in ("acc", *NEIGHBOURS):
        await populate(broker, f"{base}{namespace}")
    return f"{base}acc", *await listing(node)


async def test_the_management_api_lists_every_object_of_the_namespace_and_only_those(
    broker: TestBroker, private_broker: PrivateBroker
) -> None:
    """A dry run lists exactly ``acc``'s queues, streams and exchanges (per-key queues
    included, none of ``acc2``, ``acc_key.x`` or ``acc_lock.y``) and deletes nothing; the
    deletion then removes each of them and leaves every neighbour's in place."""
    acc, queues, exchanges = await populated(broker, private_broker)
    mine_queues = expected(broker.names.namespace, acc, queues)
    mine_exchanges = expected(broker.names.namespace, acc, exchanges)
    assert any(q.startswith(f"{acc}_key.") for q in mine_queues)  # per-key queues to find
    api = ("--management-url", str(private_broker.management_url))
    dry = await delete(broker, acc, "--dry-run", "--json", *api)
    assert dry.returncode == 0, dry.stderr
    assert names_in(report(dry)) == mine_queues | mine_exchanges
    assert all([await exists(broker, q, "queue") for q in mine_queues])
    done = await delete(broker, acc, "--json", *api)
    assert done.returncode == 0, done.stderr
    assert set(report(done)["deleted"]) == mine_queues | mine_exchanges
    assert not any([await exists(broker, q, "queue") for q in mine_queues])
    assert not any([await exists(broker, e, "exchange") for e in mine_exchanges])
    left, left_exchanges = await listing(private_broker)
    assert set(queues) - mine_queues == set(left)
    assert set(exchanges) - mine_exchanges == set(left_exchanges)


async def test_without_the_management_api_the_names_warren_computes_are_deleted(
    broker: TestBroker, private_broker: PrivateBroker
) -> None:
    """Over AMQP alone: the fixed names, the delay levels, the retry and landing queues of
    the known plans (the runtime store's too) and the partitions' queues (counted from their
    locks: the command was not given CRON_SCHEDULER_PARTITIONS) are found and deleted; the
    command says that per-key queues need the management API, and they stay, as do the
    neighbours."""
    acc, queues, exchanges = await populated(broker, private_broker)
    per_key = {
        q
        for q in expected(broker.names.namespace, acc, queues)
        if "_key." in q or "_crash." in q or "_rate." in q
    }
    mine = expected(broker.names.namespace, acc, queues) | expected(
        broker.names.namespace, acc, exchanges
    )
    dry = await delete(broker, acc, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert names_in(report(dry)) == mine - per_key
    assert f"{acc}_scheduler_retry.{STORED_PLAN}" in names_in(report(dry))
    assert "--management-url" in dry.stderr and "per key" in dry.stderr
    done = await delete(broker, acc)
    assert done.returncode == 0, done.stderr
    left, left_exchanges = await listing(private_broker)
    assert set(left) | set(left_exchanges) == (set(queues) | set(exchanges)) - (mine - per_key)


async def test_a_connected_worker_is_named_in_the_refusal_and_force_deletes(
    broker: TestBroker, private_broker: PrivateBroker, run_worker: Any
) -> None:
    """With a worker consuming the main queue the deletion is refused (exit 1), naming the
    worker (with the management API, its connection and host too) and deleting nothing;
    ``--force`` deletes, and says the worker declares its queues again."""
    namespace = broker.names.namespace
    async with Client(broker.settings()) as client:
        await client.enqueue("job", delay=600)
    await run_worker()
    refused = await delete(broker, namespace, "--json")
    assert refused.returncode == 1
    assert report(refused)["deleted"] == [] and report(refused)["connected"]
    assert f"1 consumer on {broker.names.main_queue} (a worker)" in refused.stderr
    assert "--force" in refused.stderr
    assert await exists(broker, broker.names.delay_deliver_exchange, "exchange")
    api = ("--management-url", str(private_broker.management_url))
    peer = f"{broker.names.main_queue} (a worker: warren-worker-consume from 127.0.0.1)"

    async def named() -> bool:
        done = await delete(broker, namespace, *api)
        assert done.returncode == 1, done.stderr
        return peer in done.stderr

    # The management API's consumer list is refreshed every few seconds.
    await eventually(named, 30, what="the worker's connection named", interval=1)
    forced = await delete(broker, namespace, "--force")
    assert forced.returncode == 0, forced.stderr
    assert "declare their queues again" in forced.stderr
    # The worker declares its own queues again; the delay levels are the client's.
    assert not await exists(broker, broker.names.delay_deliver_exchange, "exchange")


async def test_a_namespace_with_nothing_on_the_broker_says_so_and_exits_0(
    broker: TestBroker, private_broker: PrivateBroker
) -> None:
    """Nothing to delete is no error (a clean-up may run twice): exit 0, and it says so."""
    api = ("--management-url", str(private_broker.management_url))
    for args in ((), api):
        done = await delete(broker, f"{broker.names.namespace}none", "--json", *args)
        assert done.returncode == 0, done.stderr
        assert report(done)["objects"] == []
        assert "nothing of namespace" in done.stderr


@pytest.mark.parametrize(
    ("name", "mine"),
    [
        ("acc_scheduler", True),
        ("acc_scheduler_retry.30s-1m", True),
        ("acc_delay.27", True),
        ("acc_delay.28", False),
        ("acc_delay.land.final", True),
        ("acc_key." + "a" * 40, True),
        ("acc_key." + "a" * 39, False),
        ("acc_crash." + "b" * 32, True),
        ("acc_slot." + "c" * 16 + ".7", True),
        ("acc_rate." + "d" * 16, True),
        ("acc_lock.nightly", True),
        ("acc_lock.nightly.held-by." + "e" * 16, True),
        ("acc2_scheduler", False),
        ("acc_key.x_scheduler", False),
        ("acc_key.x_key." + "a" * 40, False),
        ("acc_lock.y_scheduler", False),
        ("acc_lock.y_scheduler_retry.1s", False),
        ("accscheduler", False),
    ],
)
def test_each_name_is_matched_by_its_whole_shape(name: str, mine: bool) -> None:
    """Among a broker holding ``acc``, ``acc2``, ``acc_key.x`` and ``acc_lock.y``, a queue is
    ``acc``'s only when its whole name has the shape of one ``acc`` makes."""
    neighbours = [f"{ns}_tasks" for ns in ("acc", "acc2", "acc_key.x", "acc_lock.y")]
    queues, _ = owned("acc", [name], neighbours)
    assert (queues == [name]) is mine
