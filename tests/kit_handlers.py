"""Typed handlers for the task handle and testing kit tests (``CRON_HANDLER_MODULES`` too)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic checks typing's only from 3.12

from warren_cron import PermanentError, RetryableError, TaskContext, task


class Report(BaseModel):
    """The payload of ``kit-report``."""

    customer: int
    period: str = "daily"


class Sent(BaseModel):
    """What ``kit-report`` returns."""

    customer: int
    pages: int


class Greeting(TypedDict):
    """The payload of ``kit-greet``."""

    name: str


@dataclass
class Flaky:
    """The payload of ``kit-flaky``: fail ``failures`` attempts, then succeed."""

    failures: int


@task("kit-report")
async def send_report(payload: Report, ctx: TaskContext) -> Sent:
    """Send a report: a typed payload, a typed result."""
    ctx.log.info("sending", customer=payload.customer, attempt=ctx.attempt)
    return Sent(customer=payload.customer, pages=3)


@task("kit-greet")
def greet(payload: Greeting, ctx: TaskContext) -> str:
    """A plain ``def`` handler with a TypedDict payload."""
    if not payload["name"]:
        raise PermanentError("a greeting needs a name")
    return f"hello {payload['name']}"


@task("kit-flaky")
async def flaky(payload: Flaky, ctx: TaskContext) -> int:
    """Fail the first ``failures`` attempts (retryable), then return the attempt number."""
    if ctx.attempt <= payload.failures:
        raise RetryableError(f"attempt {ctx.attempt} fails")
    return ctx.attempt


@task("kit-untyped")
async def untyped(payload: dict[str, object], ctx: TaskContext) -> None:
    """An untyped handler: registered as it is."""
