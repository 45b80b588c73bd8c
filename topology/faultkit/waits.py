"""One way to wait for something to become true: the chaos run and the tests poll through it.

A condition is a plain function or a coroutine function. On timeout the error names what was
awaited and the last value seen, so a failing test says what never happened.

``progressing`` waits for a count instead: as long as it keeps moving, however long that takes
on a loaded machine, and fails only once it stood still for its ``stall`` seconds.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

#: How often a condition is looked at: often enough not to slow a test, rare enough to be cheap.
INTERVAL_SECONDS = 0.02


class NeverHappened(AssertionError):
    """A condition stayed false until the timeout."""


@overload
async def eventually(
    condition: Callable[[], Awaitable[T]],
    timeout: float = ...,
    *,
    what: str | None = ...,
    interval: float = ...,
) -> T: ...


@overload
async def eventually(
    condition: Callable[[], T],
    timeout: float = ...,
    *,
    what: str | None = ...,
    interval: float = ...,
) -> T: ...


async def eventually(
    condition: Callable[[], Any],
    timeout: float = 10,
    *,
    what: str | None = None,
    interval: float = INTERVAL_SECONDS,
) -> Any:
    """Poll ``condition`` until it returns something true; return that value.

    Raises ``NeverHappened`` after ``timeout`` seconds, naming ``what`` and the last value.
    """
    last: Any = None
    try:
        async with asyncio.timeout(timeout):
            while not (last := await _value(condition)):
                await asyncio.sleep(interval)
    except TimeoutError:
        raise NeverHappened(_never(condition, what, timeout, last)) from None
    return last


async def progressing(
    measure: Callable[[], Any],
    done: Callable[[T], bool],
    stall: float = 10,
    *,
    what: str | None = None,
    interval: float = INTERVAL_SECONDS,
) -> T:
    """Poll ``measure`` (a count, or anything that changes as work goes on) until ``done``
    accepts its value; return that value.

    Bounded by progress, not by wall time: raises ``NeverHappened`` once the value stayed the
    same for ``stall`` seconds, naming ``what`` and the last value.
    """
    loop = asyncio.get_running_loop()
    last: T = await _value(measure)
    moved_at = loop.time()
    while not done(last):
        if loop.time() - moved_at > stall:
            name = what or getattr(measure, "__qualname__", repr(measure))
            raise NeverHappened(f"{name}: stood still at {last!r} for {stall} s")
        await asyncio.sleep(interval)
        now: T = await _value(measure)
        if now != last:
            last, moved_at = now, loop.time()
    return last


async def _value(condition: Callable[[], Any]) -> Any:
    value = condition()
    if inspect.isawaitable(value):
        return await value
    return value


def until(
    condition: Callable[[], T],
    timeout: float,
    *,
    what: str | None = None,
    interval: float = INTERVAL_SECONDS,
) -> T:
    """``eventually`` for code outside an event loop (benchmarks, node start-up): blocks."""
    deadline = time.monotonic() + timeout
    while not (last := condition()):
        if time.monotonic() > deadline:
            raise NeverHappened(_never(condition, what, timeout, last))
        time.sleep(interval)
    return last


def _never(condition: object, what: str | None, timeout: float, last: object) -> str:
    name = what or getattr(condition, "__qualname__", repr(condition))
    return f"{name} not true after {timeout} s (last: {last!r})"
