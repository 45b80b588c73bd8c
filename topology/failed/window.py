"""A window of concurrent moves: at most ``size`` run at once, the first failure stops the rest."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any


class Window:
    """Runs at most ``size`` moves at once; the first one that raised is raised again by the next
    ``start`` or by ``drain``, and leaving the block cancels whatever is still running."""

    def __init__(self, size: int) -> None:
        self._slots = asyncio.Semaphore(size)
        self._running: set[asyncio.Task[None]] = set()
        self._error: BaseException | None = None

    def __len__(self) -> int:
        return len(self._running)

    async def __aenter__(self) -> Window:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        for task in self._running:
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

    async def start(self, move: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Start ``move()`` once a slot is free (made only then: a refused one never exists)."""
        await self._slots.acquire()
        if self._error is not None:  # an earlier move failed, perhaps while this one waited
            self._slots.release()
            raise self._error
        task = asyncio.create_task(move())
        self._running.add(task)
        task.add_done_callback(self._finished)

    async def drain(self) -> None:
        """Wait for every move started so far."""
        await asyncio.gather(*self._running, return_exceptions=True)
        self._raise()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        self._slots.release()
        if task.cancelled():
            return
        # Retrieved even when an earlier move failed first: a failure left unread is logged as
        # "Task exception was never retrieved", a traceback on the replay's stderr.
        error = task.exception()
        if self._error is None:
            self._error = error

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error
