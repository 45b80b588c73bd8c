"""Handlers of the demo: one that works, one that recovers, one that never does.

Load them with ``CRON_HANDLER_MODULES=examples.demo_handlers``. Their payloads are typed: a
schedule or an enqueue whose payload does not fit fails at once as ``invalid-payload``, and
an application enqueues them through their handles (``await greet.enqueue(Greeting())``).
Their tests, with the testing kit and no broker: ``tests/test_examples.py``.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel, Field

from warren_cron import TaskContext, task


class Greeting(BaseModel):
    """Whom ``greet`` greets."""

    name: str = "world"


class Flakiness(BaseModel):
    """How many attempts ``flaky`` fails before it succeeds."""

    fail_attempts: int = Field(2, ge=0)


class Odds(BaseModel):
    """How often ``sometimes`` fails."""

    failure_rate: float = Field(0.5, ge=0, le=1)


@task("greet")
async def greet(payload: Greeting, ctx: TaskContext) -> str:
    """Succeed at once, returning the greeting."""
    ctx.log.info("hello", name=payload.name)
    return f"hello {payload.name}"


@task("flaky")
async def flaky(payload: Flakiness, ctx: TaskContext) -> int:
    """Fail the first ``fail_attempts`` attempts, then succeed, returning the attempt."""
    if ctx.attempt <= payload.fail_attempts:
        raise RuntimeError(f"upstream busy on attempt {ctx.attempt}")
    return ctx.attempt


@task("sometimes")
async def sometimes(payload: Odds, ctx: TaskContext) -> None:
    """Fail at random with probability ``failure_rate``."""
    if random.random() < payload.failure_rate:  # noqa: S311 - a demo coin toss
        raise RuntimeError("coin came up tails")


@task("broken")
def broken(payload: Any, ctx: TaskContext) -> None:
    """Always fail: a sync handler, run in a thread, that spends its whole retry plan."""
    raise ConnectionError("database unreachable")
