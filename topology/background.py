"""A coroutine run beside a block of code, for as long as the block runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import Any


@contextlib.asynccontextmanager
async def beside(work: Coroutine[Any, Any, None]) -> AsyncIterator[None]:
    """Run ``work`` as a task while the block runs; it is cancelled and awaited when the block
    ends, its failure or cancellation swallowed (the task reports what it must itself)."""
    task = asyncio.create_task(work)
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
