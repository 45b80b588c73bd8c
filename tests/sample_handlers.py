"""Handlers that subprocess tests load with CRON_HANDLER_MODULES=tests.sample_handlers."""

from __future__ import annotations

import asyncio
from typing import Any

from warren_cron import TaskContext, task


@task("sleepy")
async def sleepy(payload: Any, ctx: TaskContext) -> None:
    """Sleep for ``payload['seconds']``: a task that is still running at shutdown."""
    ctx.log.info("sleepy started")
    await asyncio.sleep(float(payload["seconds"]))
