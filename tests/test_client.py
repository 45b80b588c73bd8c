"""The client API against a real broker: idempotency keys, the sync client, clear errors."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.helpers import Recorder, registry
from tests.namespace import TestBroker
from warren_cron.client import BrokerUnavailable, Client, Enqueued, SyncClient
from warren_cron.client.keys import key_digest
from warren_cron.errors import SettingsError, TopologyError
from warren_cron.faultkit.waits import eventually
from warren_cron.publish import TaskPublisher

pytestmark = pytest.mark.broker


@pytest.fixture
async def key_queues(broker: TestBroker) -> AsyncIterator[list[str]]:
    """Idempotency keys a test uses; their queues are deleted afterwards."""
    keys: list[str] = []
    yield keys
    channel = await broker.channel()
    for key in keys:
        await channel.queue_delete(broker.names.key_queue(key_digest(key)))
    await channel.close()


async def test_concurrent_enqueues_with_one_key_send_one_task(
    broker: TestBroker, client: Client, run_worker: Any, key_queues: list[str]
) -> None:
    """Five enqueues race with one key: one run id, one sent, four told it was a repeat."""
    key_queues.append("invoice-42")
    recorder = Recorder()
    worker = await run_worker(registry(job=recorder))
    sent = await asyncio.gather(*(client.enqueue("job", key="invoice-42") for _ in range(5)))
    assert {done.run_id for done in sent} == {"key:invoice-42"}
    assert sorted(done.created for done in sent) == [False] * 4 + [True]
    await recorder.wait_calls(1)
    await worker.join()
    assert [ctx.run_id for _, ctx in recorder.calls] == ["key:invoice-42"]


async def test_a_key_is_remembered_across_clients(
    broker: TestBroker, client: Client, key_queues: list[str]
) -> None:
    """Another client, later, with the same key sends nothing: the broker holds the key."""
    key_queues.append("signup:7")
    first = await client.enqueue("job", key="signup:7", delay=60)
    async with Client(broker.settings()) as other:
        again = await other.enqueue("job", key="signup:7")
    assert (first.created, again.created, again.run_id) == (True, False, first.run_id)
    assert await broker.depth(broker.names.main_queue) == 0


async def test_a_key_whose_task_was_not_sent_is_free_again(
    broker: TestBroker, client: Client, key_queues: list[str]
) -> None:
    """A publish that fails (its retry queue exists with other arguments) frees the key."""
    key_queues.append("retry-me")
    broker.plan_keys.add("7s")
    channel = await broker.channel()
    await channel.declare_queue(broker.names.retry_queue("7s"), durable=True)
    await channel.close()
    with pytest.raises(TopologyError, match="exists with other arguments"):
        await client.enqueue("job", key="retry-me", plan="7s")
    assert (await client.enqueue("job", key="retry-me")).created


async def open_channels(client: Client) -> int:
    """The channels open on the client's connection, as its AMQP protocol counts them."""
    connection, _ = await client.history_access()
    assert connection.transport is not None
    return len(connection.transport.connection.channels)


async def test_refused_enqueues_leave_no_channel_behind(broker: TestBroker, client: Client) -> None:
    """Each enqueue the broker refuses (its retry queue exists with other arguments) closes
    the client's channel; the client opens one in its place, and holds one channel after
    twenty of them, not one more for each (a robust channel reopened itself)."""
    broker.plan_keys.add("7s")
    channel = await broker.channel()
    await channel.declare_queue(broker.names.retry_queue("7s"), durable=True)
    await channel.close()
    await client.enqueue("job", delay=60)
    before = await open_channels(client)
    for _ in range(20):
        with pytest.raises(TopologyError, match="exists with other arguments"):
            await client.enqueue("job", plan="7s")
    await client.enqueue("job", delay=60)

    async def level() -> bool:
        return await open_channels(client) == before

    await eventually(level, 10, what=f"{before} channels open")


def enqueue_in_thread(settings: Any) -> Enqueued:
    """Use a SyncClient from a plain thread, as a Flask view or a script would."""
    results: list[Enqueued] = []

    def body() -> None:
        with SyncClient(settings) as client:
            results.append(client.enqueue("job", {"n": 1}))
            results.append(client.enqueue("job", {"n": 2}, delay=1))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    return results[0]


async def test_the_sync_client_works_from_a_plain_thread(
    broker: TestBroker, run_worker: Any
) -> None:
    """No event loop in the caller: the task is confirmed, run, and the delayed one too."""
    recorder = Recorder()
    worker = await run_worker(registry(job=recorder))
    settings = broker.settings()
    broker.plan_keys.update(step.key for step in settings.default_plan().suffixes())
    done = await asyncio.to_thread(enqueue_in_thread, settings)
    await recorder.wait_calls(2)
    await worker.join()
    assert done.run_id == recorder.calls[0][1].run_id
    assert len(recorder.calls) == 2


def test_a_sync_call_that_times_out_is_cancelled(
    broker: TestBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An enqueue past the SyncClient's timeout raises TimeoutError and stops there: it
    cannot send the task after the caller was told it failed."""
    cancelled = threading.Event()

    async def never_confirmed(*args: Any, **kwargs: Any) -> Enqueued:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        raise AssertionError("never reached")

    monkeypatch.setattr(Client, "enqueue", never_confirmed)
    client = SyncClient(broker.settings(), timeout=0.2)
    try:
        with pytest.raises(TimeoutError):
            client.enqueue("job")
        assert cancelled.wait(5)
    finally:
        client.close()


@pytest.mark.parametrize(("stage", "kept"), [("prepare", False), ("send", True)])
async def test_a_retry_with_its_key_after_a_cancelled_enqueue_sends_the_task_once(
    broker: TestBroker,
    client: Client,
    key_queues: list[str],
    monkeypatch: pytest.MonkeyPatch,
    stage: str,
    kept: bool,
) -> None:
    """Cancelled (a caller's timeout) once its task's publish began, an enqueue keeps its
    key, since the task may reach the broker; cancelled before, it frees the key."""
    key_queues.append("order-9")
    original = getattr(TaskPublisher, stage)

    async def then_hang(*args: Any, **kwargs: Any) -> None:
        await original(*args, **kwargs)
        await asyncio.Event().wait()  # a confirm that never comes back

    with monkeypatch.context() as patched, pytest.raises(TimeoutError):
        patched.setattr(TaskPublisher, stage, then_hang)
        async with asyncio.timeout(0.5):
            await client.enqueue("job", key="order-9")
    retried = await client.enqueue("job", key="order-9")
    assert retried.created is not kept
    assert await broker.depth(broker.names.main_queue) == 1


async def test_an_enqueue_cut_by_a_stuck_connection_is_broker_unavailable(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiormq drops a connection as stuck (no frame within the heartbeat timeout) with a
    CancelledError as its reason, and fails the publish under way with it: the caller, whose
    task was not cancelled, gets ``BrokerUnavailable`` as documented, not a CancelledError
    that ends its task (or its request, in the monitor's API)."""
    await client.connect()

    async def cut(*args: Any, **kwargs: Any) -> None:
        connection = client._connection
        assert connection is not None and connection.transport is not None
        await connection.transport.connection.close(asyncio.CancelledError())  # aiormq's drop
        raise asyncio.CancelledError  # what the publish under way got

    monkeypatch.setattr(TaskPublisher, "send", cut)
    with pytest.raises(BrokerUnavailable, match=r"the enqueue of 'job'.*CancelledError"):
        await client.enqueue("job")


async def test_an_unreachable_broker_is_a_clear_error(broker: TestBroker) -> None:
    """Nothing listens at the URL: BrokerUnavailable names the address and what to do."""
    settings = broker.settings(amqp_url="amqp://guest:guest@127.0.0.1:1/")
    with pytest.raises(BrokerUnavailable, match=r"127\.0\.0\.1:1/.*CRON_AMQP_URL"):
        await Client(settings).enqueue("job")


def test_an_unknown_queue_type_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client built from the environment names the bad variable."""
    monkeypatch.setenv("CRON_QUEUE_TYPE", "fast")
    with pytest.raises(SettingsError, match="CRON_QUEUE_TYPE"):
        Client()
