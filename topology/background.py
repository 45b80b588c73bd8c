"""A coroutine run beside a block of code, for as long as the block runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any

import structlog

log = structlog.get_logger("warren")

#: How long a cancelled task may run on before it is cancelled again.
CANCEL_AGAIN_SECONDS = 1.0


@contextlib.asynccontextmanager
async def beside(work: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """Run ``work`` as a task while the block runs; it is cancelled and awaited when the block
    ends, its failure or cancellation swallowed (the task reports what it must itself)."""
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        await ended(task)


async def ended(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait for its end, cancelling it again each second it runs on: a
    library may swallow a cancel (aiormq answering one with a broker error, 3.11's
    ``asyncio.wait_for`` returning a result that came with it), and a scheduler's session
    then waited on its beats' reading for ever. Its outcome is swallowed."""
    try:
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_AGAIN_SECONDS)
        while not task.done():
            log.warning("a task ran on after its cancel; cancelled again", task=_name(task))
            task.cancel()
            await asyncio.wait({task}, timeout=CANCEL_AGAIN_SECONDS)
    except asyncio.CancelledError:
        task.cancel()  # the waiter itself is cancelled: the task must not outlive it
        raise
    if not task.cancelled():
        task.exception()  # retrieved: not logged as never retrieved


def _name(task: asyncio.Task[Any]) -> str:
    coroutine = task.get_coro()
    return getattr(coroutine, "__qualname__", None) or task.get_name()
