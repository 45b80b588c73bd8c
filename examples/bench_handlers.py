"""Handlers for ``scripts/bench.py``: load with CRON_HANDLER_MODULES=examples.bench_handlers."""

from __future__ import annotations

from typing import Any

from warren_cron import TaskContext, task


@task("fail_once")
async def fail_once(payload: Any, ctx: TaskContext) -> None:
    """Fail the first attempt, succeed on the retry: exercises the whole retry path."""
    if ctx.attempt == 1:
        raise RuntimeError("first attempt fails on purpose")
