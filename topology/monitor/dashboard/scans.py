"""Reads of the history stream a request asks for: bounded in number at once, in events each,
and ended when their client leaves or the monitor stops.

The monitor answers what it keeps in memory without reading the stream (the runs it follows,
``recent.py``); anything else is a scan, which on a week of a busy install's history could
read for minutes. So each scan gets a ``Budget`` of ``CRON_HISTORY_SCAN_EVENTS`` events and
answers what it found by then, at most ``CRON_HISTORY_SCANS`` run at once (the others are
refused, to try again), and a scan runs as a task of its own that is cancelled, its consumer
ended and its channel closed, as soon as its client hangs up: the web server does not cancel
handlers (a write cut half-way by a client's disconnect would be worse), so the scan watches
the request's connection itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import TYPE_CHECKING, TypeVar

from aiohttp import web

from warren_cron.clock import utcnow
from warren_cron.history.reader import Budget
from warren_cron.history.recent import one_run, story_start, timeless_run
from warren_cron.history.runs import Run, run_time

if TYPE_CHECKING:
    from warren_cron.monitor.dashboard.service import Dashboard

R = TypeVar("R")
#: How often a scan looks whether its client is still there.
WATCH_SECONDS = 0.2
#: What a refused scan's client is told to wait: a scan ends within seconds, at its bound.
RETRY_AFTER = "2"


class ScanRefused(Exception):
    """No scan now: ``status`` 429 when every slot is taken, 503 when the monitor stops."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message
        self.headers = {"Retry-After": RETRY_AFTER}


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
        self, request: web.Request, read: Callable[[Budget], Coroutine[object, object, R]]
    ) -> tuple[R, Budget]:
        """What ``read`` found within its budget, and the budget; ``ScanRefused`` when too many
        scan, the monitor stops, or the client left (then nobody reads the answer)."""
        self._admit()
        budget = Budget(self.events)
        task: asyncio.Task[R] = asyncio.create_task(read(budget))
        self._running.add(task)
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=WATCH_SECONDS)
                if not task.done() and _gone(request):
                    task.cancel()
            if task.cancelled():
                raise ScanRefused(
                    503, "the read was stopped: its client left, or the monitor stops"
                )
            return task.result(), budget
        finally:
            self._running.discard(task)
            await _ended(task)

    def _admit(self) -> None:
        if self._closed:
            raise ScanRefused(503, "the monitor is stopping")
        if len(self._running) >= self.limit:
            why = f"{self.limit} reads of the history run already (CRON_HISTORY_SCANS): try again"
            raise ScanRefused(429, why)

    async def close(self) -> None:
        """Refuse new scans and end the running ones (their channels closed), for a stop."""
        self._closed = True
        running = list(self._running)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)


async def run_story(dashboard: Dashboard, run_id: str, budget: Budget) -> Run | None:
    """One run's story from the stream within ``budget``: from shortly before the time its id
    names, else (``key:...``) from the newest events back over the history's retention."""
    connection, stream = dashboard.connection, dashboard.names.history_stream
    if run_time(run_id) is None:
        kept = timedelta(seconds=dashboard.settings.history_max_age_seconds)
        return await timeless_run(connection, stream, run_id, utcnow() - kept, budget)
    start = story_start(run_id, None, dashboard.offsets.offset_at)
    return await one_run(connection, stream, run_id, start, budget)


def _gone(request: web.Request) -> bool:
    """True once the request's client has closed its connection."""
    transport = request.transport
    return transport is None or transport.is_closing()


async def _ended(task: asyncio.Task[R]) -> None:
    """Cancel ``task`` if it still runs (its caller was cancelled) and wait for its cleanup."""
    if not task.done():
        task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved: a failure the caller did not wait for is not logged twice
