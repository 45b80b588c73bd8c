"""Run one attempt of a task and say how it went, without deciding the message's fate."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Coroutine, Generator
from dataclasses import dataclass
from enum import Enum
from typing import Any

import orjson

from warren_cron.clock import utcnow
from warren_cron.envelope import Envelope
from warren_cron.errors import PermanentError, TaskError
from warren_cron.worker.context import TaskContext
from warren_cron.worker.registry import Registered, Registry


class Outcome(Enum):
    """How an attempt ended."""

    SUCCEEDED = "succeeded"
    RETRYABLE = "retryable"
    TERMINAL = "terminal"
    #: Not run: another run of the schedule holds its lock (overlap policy).
    CONTENDED = "lock-contended"
    #: Cancelled: a newer run of a ``Replace`` schedule took over.
    REPLACED = "replaced"
    #: Not run: flow control defers it ``retry_after`` seconds, no attempt spent.
    DEFERRED = "deferred"
    #: Not run, or stopped while running: its run was cancelled (``worker/cancels.py``).
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class Result:
    """Outcome of one attempt, with a short reason and the error text if it failed."""

    outcome: Outcome
    reason: str
    error: str | None = None
    #: The HTTP status an ``http`` task got, for the run history.
    http_status: int | None = None
    #: Seconds the endpoint asked to wait before the next attempt (``Retry-After``).
    retry_after: float | None = None
    #: What the handler returned, as JSON already encoded (None when it returned None).
    value: orjson.Fragment | None = None
    #: The flow-control key that deferred it (a destination, ``schedule:<name>``, a task).
    key: str | None = None


#: The default bound of a handler's return value as JSON (``CRON_RESULT_MAX_BYTES``).
RESULT_MAX_BYTES = 65_536
SUCCESS = Result(Outcome.SUCCEEDED, "succeeded")
#: Reason of a task not run, or not retried, because its deadline (or ttl) passed.
EXPIRED = "expired"


def describe(error: BaseException) -> str:
    """``Type: message`` of an exception, for logs and failure records."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


async def call_handler(registered: Registered, payload: Any, ctx: TaskContext) -> Any:
    """Call a handler under the attempt's timeout and return what it returned; sync handlers
    run in a thread."""
    if registered.times_itself:
        # One timer per attempt, not two: at thousands of attempts a second, each costs.
        return await registered.func(payload, ctx)  # type: ignore[misc]
    if not registered.is_async:
        async with asyncio.timeout(ctx.timeout_seconds):
            # The thread cannot be killed: on timeout the attempt stops waiting for it.
            return await asyncio.to_thread(registered.func, payload, ctx)
    coro: Coroutine[Any, Any, Any] = registered.func(payload, ctx)  # type: ignore[assignment]
    try:
        pending = coro.send(None)
    except StopIteration as done:
        # It ended without waiting on anything, as quick handlers do: no timer was needed
        # (none could have fired while it ran), and setting one costs every attempt.
        return done.value
    async with asyncio.timeout(ctx.timeout_seconds):
        return await resumed(coro, pending)


@types.coroutine
def resumed(coro: Coroutine[Any, Any, Any], pending: Any) -> Generator[Any, Any, Any]:
    """The rest of ``coro`` after a first step that yielded ``pending``: what ``await coro``
    does from there, the task's wake-ups and cancels passed through."""
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as error:  # a cancel (the timeout's), passed to the handler
            try:
                pending = coro.throw(error)
            except StopIteration as done:
                return done.value
            continue
        try:
            pending = coro.send(sent)
        except StopIteration as done:
            return done.value


def http_status(value: object) -> int | None:
    """The HTTP status a handler returned (``{"status": 200}``) or raised (``error.status``)."""
    status = value.get("status") if isinstance(value, dict) else getattr(value, "status", None)
    return status if isinstance(status, int) else None


def returned_result(returned: Any, limit: int) -> Result:
    """The success of a handler that returned ``returned``: its value encoded as JSON once,
    here, so that the history event embeds it as is; a value that is no JSON or is over
    ``limit`` bytes fails the attempt for good (retrying would return it again)."""
    status = http_status(returned)
    try:
        encoded = orjson.dumps(returned)
    except TypeError as error:
        why = f"the handler returned a value that is not JSON ({error}): return JSON data"
        return Result(Outcome.TERMINAL, "bad-result", why, status)
    if len(encoded) > limit:
        why = (
            f"the handler returned {len(encoded)} bytes of JSON, over CRON_RESULT_MAX_BYTES="
            f"{limit}: return less (a reference to where the data is kept)"
        )
        return Result(Outcome.TERMINAL, "result-too-large", why, status)
    return Result(Outcome.SUCCEEDED, "succeeded", None, status, value=orjson.Fragment(encoded))


async def run_attempt(
    registry: Registry, envelope: Envelope, ctx: TaskContext, limit: int = RESULT_MAX_BYTES
) -> Result:
    """Run the envelope's handler once and classify what happened; its return value is the
    run's result, up to ``limit`` bytes of JSON."""
    registered = registry.get(envelope.task)
    if registered is None:
        known = ", ".join(registry.names())
        return Result(
            Outcome.TERMINAL,
            "unknown-task",
            f"no handler for task {envelope.task!r} "
            f"(known: {known}); register it and list its module in CRON_HANDLER_MODULES",
        )
    if envelope.deadline is not None and utcnow() > envelope.deadline:
        return Result(Outcome.TERMINAL, EXPIRED, f"not run: deadline {envelope.deadline} passed")
    try:
        returned = await call_handler(registered, envelope.payload, ctx)
    except PermanentError as error:
        return Result(Outcome.TERMINAL, error.reason, describe(error), http_status(error))
    except TimeoutError:
        return Result(Outcome.RETRYABLE, "timeout", f"attempt ran past {ctx.timeout_seconds}s")
    except TaskError as error:
        wait = getattr(error, "retry_after", None)
        return Result(Outcome.RETRYABLE, error.reason, describe(error), http_status(error), wait)
    except Exception as error:
        return Result(Outcome.RETRYABLE, "exception", describe(error), http_status(error))
    # Most handlers return nothing: they pay no encoding.
    return SUCCESS if returned is None else returned_result(returned, limit)
