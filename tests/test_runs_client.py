"""Run handles on a real broker: a run's state through its life, its result, its error."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.conftest import plan
from tests.helpers import registry
from tests.namespace import TestBroker
from warren_cron.client import Client, SyncClient
from warren_cron.client.runs import RunHandle
from warren_cron.errors import PermanentError, RunFailed, RunTimeout
from warren_cron.faultkit.waits import eventually
from warren_cron.history.lifecycle import RunStatus
from warren_cron.worker.context import TaskContext

pytestmark = pytest.mark.broker


@dataclass
class Gated:
    """Fails its first attempt once ``gate`` opens; returns ``value`` on the next."""

    value: Any
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    calls: int = 0

    async def __call__(self, payload: Any, ctx: TaskContext) -> Any:
        """The first call waits for the gate, then fails; later calls return ``value``."""
        self.calls += 1
        if self.calls == 1:
            await self.gate.wait()
            raise RuntimeError("first attempt fails")
        return self.value


async def state_is(handle: RunHandle, state: str) -> RunStatus:
    """Wait until the handle's status shows ``state``."""

    async def seen() -> RunStatus | None:
        status = await handle.status()
        return status if status.state == state else None

    found: RunStatus | None = await eventually(seen, 20, what=f"state {state}")
    assert found is not None
    return found


async def test_status_follows_a_run_from_pending_through_retrying_to_succeeded(
    client: Client, run_worker: Any
) -> None:
    """Pending before a worker runs, running while its attempt does, retrying after it failed,
    succeeded with the value its second attempt returned and both attempts listed."""
    handle = client.run(await client.enqueue("job", {"n": 1}, plan=plan(1500)))
    assert (await handle.status()).state == "pending"
    job = Gated({"answer": 42})
    await run_worker(registry(job=job))
    await state_is(handle, "running")
    job.gate.set()
    await state_is(handle, "retrying")
    done = await state_is(handle, "succeeded")
    assert done.result == {"answer": 42}
    first, second = done.attempts
    assert (first.number, first.outcome, first.error) == (
        1,
        "retrying",
        "RuntimeError: first attempt fails",
    )
    assert first.started_at is not None and first.ended_at is not None
    assert first.started_at <= first.ended_at and first.worker is not None
    assert (second.number, second.outcome, second.error) == (2, "succeeded", None)


async def test_result_follows_the_stream_until_the_run_ends_and_returns_its_value(
    client: Client, run_worker: Any
) -> None:
    """result() called before any worker runs returns the handler's value once it ran."""

    async def job(payload: Any, ctx: TaskContext) -> dict[str, Any]:
        return {"doubled": payload * 2}

    handle = client.run(await client.enqueue("job", 21))
    waiting = asyncio.create_task(handle.result(timeout=20))
    await run_worker(registry(job=job))
    assert await waiting == {"doubled": 42}
    assert await client.run(handle.run_id).result(timeout=10) == {"doubled": 42}


async def test_a_failed_run_shows_failed_and_result_raises_its_error(
    client: Client, run_worker: Any
) -> None:
    """A handler raising PermanentError: state failed, and result() raises RunFailed with it."""

    async def job(payload: Any, ctx: TaskContext) -> None:
        raise PermanentError("order 7 does not exist")

    await run_worker(registry(job=job))
    handle = client.run(await client.enqueue("job"))
    with pytest.raises(RunFailed, match="order 7 does not exist") as raised:
        await handle.result(timeout=20)
    assert raised.value.state == "failed"
    status = await handle.status()
    assert status.state == "failed" and [a.outcome for a in status.attempts] == ["failed"]


async def test_result_of_a_run_that_never_ends_raises_a_timeout(client: Client) -> None:
    """With no worker the run never ends: result() raises RunTimeout, a TimeoutError."""
    handle = client.run(await client.enqueue("job"))
    with pytest.raises(RunTimeout, match=r"did not end within 0\.5s"):
        await handle.result(timeout=0.5)
    assert issubclass(RunTimeout, TimeoutError)


async def test_a_delayed_run_shows_delayed(client: Client) -> None:
    """A task enqueued an hour ahead is delayed, not pending."""
    handle = client.run(await client.enqueue("job", delay=3600))
    assert (await handle.status()).state == "delayed"


async def test_a_result_over_the_bound_fails_the_attempt_and_names_the_setting(
    client: Client, run_worker: Any
) -> None:
    """A 2 KB return value over a 1 KiB bound: the run fails for good, the error says why."""

    async def job(payload: Any, ctx: TaskContext) -> str:
        return "x" * 2000

    await run_worker(registry(job=job), result_max_bytes=1024)
    handle = client.run(await client.enqueue("job", plan=plan(100, 100)))
    with pytest.raises(RunFailed, match="CRON_RESULT_MAX_BYTES=1024") as raised:
        await handle.result(timeout=20)
    assert "2002 bytes of JSON" in str(raised.value)
    status = await handle.status()
    assert [(a.outcome, a.reason) for a in status.attempts] == [("failed", "result-too-large")]


async def test_the_sync_client_gives_the_same_status_and_result(
    broker: TestBroker, run_worker: Any
) -> None:
    """SyncClient.run(...).result() from a thread returns the value; status() says succeeded."""

    async def job(payload: Any, ctx: TaskContext) -> list[int]:
        return [1, 2, 3]

    await run_worker(registry(job=job))
    settings = broker.settings()
    broker.plan_keys.update(step.key for step in settings.default_plan().suffixes())

    def use() -> tuple[Any, str]:
        with SyncClient(settings) as sync:
            handle = sync.run(sync.enqueue("job"))
            return handle.result(timeout=20), handle.status().state

    assert await asyncio.to_thread(use) == ([1, 2, 3], "succeeded")
