"""Handlers that overlap tests load with CRON_HANDLER_MODULES=tests.overlap_handlers."""

from __future__ import annotations

import asyncio
from typing import Any

from warren_cron import TaskContext, task


@task("hold")
async def hold(payload: Any, ctx: TaskContext) -> None:
    """Run for ``payload['seconds']``: long enough for a second run to find the lock held."""
    ctx.log.info("hold started", schedule=ctx.schedule)
    await asyncio.sleep(float(payload["seconds"]))
