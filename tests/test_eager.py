"""The eager client and the ``warren_eager`` fixture: enqueues run their tasks in the test."""

from __future__ import annotations

from typing import Any

import pytest

from tests.kit_handlers import Report, Sent, greet, send_report
from warren_cron import TaskContext
from warren_cron.errors import EnqueueError, RunFailed
from warren_cron.testing import EagerClient, Kit, SyncEagerClient
from warren_cron.testing.eager import EagerLoop
from warren_cron.worker.registry import Registry

looping = Registry()
runs: list[int] = []


@looping.task("kit-chain")
async def chain(payload: int, ctx: TaskContext) -> int:
    """Enqueue itself with ``payload - 1`` until 0: a recursive enqueue."""
    runs.append(payload)
    if payload > 0:
        await chain.enqueue(payload - 1)
    return payload


@looping.task("kit-forever")
async def forever(payload: None, ctx: TaskContext) -> None:
    """Enqueue itself without end."""
    await forever.enqueue(None)


@looping.task("kit-boom")
def boom(payload: Any, ctx: TaskContext) -> None:
    """Raise, whatever the payload."""
    raise ValueError("boom")


async def test_an_enqueue_through_a_handle_runs_the_task_in_the_test(
    warren_eager: EagerClient,
) -> None:
    """``warren_eager`` is every handle's default client: the run has ended once the enqueue
    returns, and ``result()`` reads its typed result."""
    done = await send_report.enqueue(Report(customer=5), delay=3600)
    assert warren_eager.runs[done.run_id].state == "succeeded"
    assert await send_report.result(done) == Sent(customer=5, pages=3)


def test_a_sync_enqueue_runs_the_task_too(warren_eager: EagerClient) -> None:
    """``enqueue_sync`` through the fixture's sync client shares the eager client's records."""
    done = greet.enqueue_sync({"name": "Ada"})
    assert greet.result_sync(done) == "hello Ada"
    assert warren_eager.enqueued == [("kit-greet", {"name": "Ada"}, {})]


async def test_a_wrong_payload_sends_nothing(warren_eager: EagerClient) -> None:
    """A payload that does not fit the handler's model is refused at the enqueue, naming the
    field, and nothing runs."""
    with pytest.raises(EnqueueError, match="customer: Input should be a valid integer"):
        await send_report.enqueue({"customer": "x"})  # type: ignore[arg-type]
    assert warren_eager.enqueued == []


async def test_a_handler_raising_fails_the_enqueue_with_run_failed() -> None:
    """The handler's error, after its retries on the virtual clock, is the enqueue's
    ``RunFailed``; with ``raise_failures=False`` the run is kept, failed, instead."""
    async with EagerClient(Kit(registry=looping)) as eager:
        with pytest.raises(RunFailed, match="ValueError: boom"):
            await boom.enqueue({}, client=eager, plan="1m-1h")
        (run,) = eager.runs.values()
        assert (run.state, run.reason, len(run.attempts)) == ("failed", "retries-exhausted", 3)
    async with EagerClient(Kit(registry=looping), raise_failures=False) as eager:
        done = await boom.enqueue({}, client=eager)
        with pytest.raises(RunFailed, match="ValueError: boom"):
            await eager.run(done).result()


async def test_a_recursive_enqueue_runs_after_its_parent_not_inside_it() -> None:
    """A handler enqueueing itself: each child runs once its parent has ended, in order."""
    runs.clear()
    async with EagerClient(Kit(registry=looping)) as eager:
        await chain.enqueue(3, client=eager)
    assert runs == [3, 2, 1, 0]
    assert [run.result for run in eager.runs.values()] == [3, 2, 1, 0]


async def test_an_endless_recursive_enqueue_stops_with_a_clear_error() -> None:
    """A handler that enqueues itself without end is stopped after ``max_runs`` runs."""
    async with EagerClient(Kit(registry=looping), max_runs=50) as eager:
        with pytest.raises(EagerLoop, match=r"50 runs in one eager enqueue.*kit-forever"):
            await forever.enqueue(None, client=eager)
    assert len(eager.runs) == 50


async def test_an_idempotency_key_sends_once(warren_eager: EagerClient) -> None:
    """A second enqueue with a key used before runs nothing, as on a broker."""
    first = await send_report.enqueue(Report(customer=1), key="k")
    second = await send_report.enqueue(Report(customer=1), key="k")
    assert (first.run_id, first.created, second.created) == ("key:k", True, False)
    assert len(warren_eager.runs) == 1


def test_a_sync_eager_client_stands_alone() -> None:
    """``SyncEagerClient()`` without the fixture: the string form of an enqueue too."""
    with SyncEagerClient() as client:
        done = client.enqueue("kit-greet", {"name": "Bo"})
        assert client.run(done).result() == "hello Bo"
