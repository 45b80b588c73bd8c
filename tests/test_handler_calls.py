"""How an async handler is called: one that ends at once sets no timer; one that waits runs on
under the attempt's timeout, and its task's cancels, errors and results pass through."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from warren_cron.worker.attempt import call_handler
from warren_cron.worker.context import TaskContext
from warren_cron.worker.registry import Registry


def context(timeout: float = 5.0) -> TaskContext:
    """A first attempt's context, bounded by ``timeout`` seconds."""
    return TaskContext(
        run_id="r1",
        task="t",
        schedule=None,
        scheduled_for=datetime(2026, 1, 1, tzinfo=UTC),
        attempt=1,
        redelivered=False,
        timeout_seconds=timeout,
    )


async def called(handler: Any, timeout: float = 5.0) -> Any:
    """What ``call_handler`` returns for ``handler``, registered as a worker would."""
    registry = Registry()
    registry.register("t", handler)
    registered = registry.get("t")
    assert registered is not None
    return await call_handler(registered, {"n": 1}, context(timeout))


async def test_a_handler_that_ends_at_once_returns_without_a_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No ``asyncio.timeout`` is entered for a handler that never waits."""

    async def quick(payload: Any, ctx: TaskContext) -> int:
        return int(payload["n"]) + 1

    def no_timer(*_: Any) -> Any:
        raise AssertionError("a timer was set")

    monkeypatch.setattr(asyncio, "timeout", no_timer)
    assert await called(quick) == 2


async def test_a_handler_that_waits_returns_what_it_returned() -> None:
    """Several suspensions (a future, a bare yield), then its value."""

    async def waits(payload: Any, ctx: TaskContext) -> str:
        await asyncio.sleep(0)
        await asyncio.sleep(0.01)
        future = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(future.set_result, "done")
        return str(await future)

    assert await called(waits) == "done"


async def test_a_handler_past_its_timeout_is_stopped_with_a_timeout() -> None:
    """The handler's own ``finally`` runs: the cancel reached it."""
    cleaned: list[bool] = []

    async def slow(payload: Any, ctx: TaskContext) -> None:
        try:
            await asyncio.sleep(30)
        finally:
            cleaned.append(True)

    with pytest.raises(TimeoutError):
        await called(slow, timeout=0.05)
    assert cleaned == [True]


async def test_errors_before_and_after_a_wait_reach_the_caller() -> None:
    """Raised in the first step or after a suspension: the same error either way."""

    async def at_once(payload: Any, ctx: TaskContext) -> None:
        raise ValueError("bad at once")

    async def later(payload: Any, ctx: TaskContext) -> None:
        await asyncio.sleep(0)
        raise KeyError("bad later")

    with pytest.raises(ValueError, match="bad at once"):
        await called(at_once)
    with pytest.raises(KeyError, match="bad later"):
        await called(later)


async def test_a_cancel_of_the_attempt_reaches_a_waiting_handler() -> None:
    """Cancelling the attempt's task (a run's cancel, a shutdown) cancels the handler in it,
    which may catch it and clean up."""
    started, seen = asyncio.Event(), []

    async def waits(payload: Any, ctx: TaskContext) -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    attempt = asyncio.create_task(called(waits))
    await started.wait()
    attempt.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    assert seen == ["cancelled"]
