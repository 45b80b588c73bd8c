"""Reads of the history stream a viewer asks for: bounded in number at once, in events each,
and ended when their caller leaves or the monitor stops.

The monitor answers what it keeps in memory without reading the stream (the runs it follows,
``monitor/console/recent.py``); anything else is a scan, which on a week of a busy
install's history could read for minutes. So each scan gets a ``Budget`` of
``CRON_HISTORY_SCAN_EVENTS`` events and answers what it found by then, at most
``CRON_HISTORY_SCANS`` run at once (the others are refused, to try again), and a scan runs as
a task of its own that is cancelled, its consumer ended and its channel closed, as soon as its
caller is gone: a web server does not cancel handlers (a write cut half-way by a client's
disconnect would be worse), so the scan watches its caller's connection itself. The API and
the pages share one gate, and tell a refusal each in their own terms (429 or 503).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Protocol, TypeVar

from warren_cron.errors import WarrenError
from warren_cron.history.reader import Budget

R = TypeVar("R")
#: How often a scan looks whether its caller is still there.
WATCH_SECONDS = 0.2
#: What a refused scan's caller is told to wait, in seconds: a scan ends within seconds.
RETRY_AFTER = 2


class Caller(Protocol):
    """Who asked for a scan: a request, whose connection closes when its client leaves."""

    @property
    def transport(self) -> asyncio.BaseTransport | None:
        """The caller's connection (None once it is gone)."""


class ScanRefused(WarrenError):
    """No scan now: ``busy`` when every slot is taken, else the monitor stops (or the caller
    left)."""

    def __init__(self, busy: bool, message: str) -> None:
        super().__init__(message)
        self.busy, self.message = busy, message
        self.retry_after = RETRY_AFTER


class ScanGate:
    """At most ``limit`` scans at once, each of at most ``events`` events."""

    def __init__(self, limit: int, events: int) -> None:
        self.limit, self.events = limit, events
        self._running: set[asyncio.Task[object]] = set()
        self._closed = False

    @property
    def running(self) -> int:
        """How many scans run now."""
        return len(self._running)

    async def scan(
        self, caller: Caller, read: Callable[[Budget], Coroutine[object, object, R]]
    ) -> tuple[R, Budget]:
        """What ``read`` found within its budget, and the budget; ``ScanRefused`` when too many
        scan, the monitor stops, or the caller left (then nobody reads the answer)."""
        self._admit()
        budget = Budget(self.events)
        task: asyncio.Task[R] = asyncio.create_task(read(budget))
        self._running.add(task)
        try:
            await _until_done_or_gone(task, caller)
            if task.cancelled():
                why = "the read was stopped: its client left, or the monitor stops"
                raise ScanRefused(False, why)
            return task.result(), budget
        finally:
            self._running.discard(task)
            await _ended(task)

    def _admit(self) -> None:
        if self._closed:
            raise ScanRefused(False, "the monitor is stopping")
        if len(self._running) >= self.limit:
            why = f"{self.limit} reads of the history run already (CRON_HISTORY_SCANS): try again"
            raise ScanRefused(True, why)

    async def close(self) -> None:
        """Refuse new scans and end the running ones (their channels closed), for a stop."""
        self._closed = True
        running = list(self._running)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)


async def _until_done_or_gone(task: asyncio.Task[R], caller: Caller) -> None:
    """Wait for ``task``, cancelling it once if the caller leaves first: only once, as a
    second cancel would cut the read's own cleanup (its consumer's cancel, its channel's
    close) when the broker answers slower than a look, and leave its consumer on the stream."""
    while not task.done():
        await asyncio.wait({task}, timeout=WATCH_SECONDS)
        if not task.done() and _gone(caller):
            task.cancel()
            await asyncio.wait({task})


def _gone(caller: Caller) -> bool:
    """True once the caller's client has closed its connection."""
    transport = caller.transport
    return transport is None or transport.is_closing()


async def _ended(task: asyncio.Task[R]) -> None:
    """Cancel ``task`` if it still runs (its caller was cancelled) and wait for its cleanup."""
    if not task.done():
        task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved: a failure the caller did not wait for is not logged twice
