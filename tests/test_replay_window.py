"""The replay's window of moves in flight: bounded, and the first failure stops the run."""

from __future__ import annotations

import asyncio
import gc
import warnings
from functools import partial

import pytest

from warren_cron.failed.window import Window


async def test_at_most_size_moves_run_at_once_and_drain_waits_for_all() -> None:
    """Ten moves through a window of three: never more than three at a time, all finish."""
    running, peak, done = 0, 0, []

    async def move(n: int) -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        done.append(n)

    async with Window(3) as window:
        for n in range(10):
            await window.start(partial(move, n))
        await window.drain()
    assert (peak, sorted(done)) == (3, list(range(10)))


async def test_a_failed_move_is_raised_by_the_next_start_and_no_later_move_is_made() -> None:
    """After a move raised, starting another raises that error; the refused move never exists."""
    made: list[int] = []

    async def failing() -> None:
        raise ConnectionError("broker gone")

    async def later(n: int) -> None:
        made.append(n)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine never awaited would warn
        async with Window(1) as window:
            await window.start(failing)
            with pytest.raises(ConnectionError, match="broker gone"):
                for n in range(3):
                    await window.start(partial(later, n))
            with pytest.raises(ConnectionError):
                await window.drain()
        gc.collect()
    assert made == []


async def test_every_failed_move_is_retrieved_so_none_is_logged_as_never_retrieved() -> None:
    """Two moves fail (a broker gone under both) before the next start: that start raises the
    first, and the second's error is read too, so asyncio logs no "Task exception was never
    retrieved" traceback on the replay's stderr."""
    unread: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: unread.append(context))
    both_failed = asyncio.Barrier(3)

    async def failing() -> None:
        try:
            raise ConnectionError("broker gone")
        finally:
            await both_failed.wait()

    with pytest.raises(ConnectionError):
        async with Window(3) as window:
            await window.start(failing)
            await window.start(failing)
            await both_failed.wait()
            while len(window):  # the moves' done callbacks run on the next turns of the loop
                await asyncio.sleep(0)
            await window.start(failing)
    gc.collect()
    assert not unread
