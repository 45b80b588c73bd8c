"""Handlers of the demo: one that works, one that recovers, one that never does.

Load them with ``CRON_HANDLER_MODULES=examples.demo_handlers``.
"""

from __future__ import annotations

import random
from typing import Any

from warren_cron import TaskContext, task


@task("greet")
async def greet(payload: Any, ctx: TaskContext) -> None:
    """Succeed at once."""
    ctx.log.info("hello", name=(payload or {}).get("name", "world"))


@task("flaky")
async def flaky(payload: Any, ctx: TaskContext) -> None:
    """Fail the first ``payload['fail_attempts']`` attempts (default 2), then succeed."""
    if ctx.attempt <= int((payload or {}).get("fail_attempts", 2)):
        raise RuntimeError(f"upstream busy on attempt {ctx.attempt}")


@task("sometimes")
async def sometimes(payload: Any, ctx: TaskContext) -> None:
    """Fail at random with probability ``payload['failure_rate']`` (default 0.5)."""
    if random.random() < float((payload or {}).get("failure_rate", 0.5)):  # noqa: S311 - a demo coin toss
        raise RuntimeError("coin came up tails")


@task("broken")
def broken(payload: Any, ctx: TaskContext) -> None:
    """Always fail: a sync handler, run in a thread, that spends its whole retry plan."""
    raise ConnectionError("database unreachable")
