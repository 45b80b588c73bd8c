"""Long polls: ``GET /api/v1/runs/{id}?wait=SECONDS`` answers once the run ended or the wait
is over, so a shell script or a service in any language can enqueue, then wait, with curl.

Waiting calls share the dashboard's live follow of the history stream: each registers an
event, woken by any event of its run, and reads the run again; no call opens a consumer of
its own, so a thousand waiting calls cost a thousand small objects, not a thousand channels.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

from warren_cron.history.events import Event

#: Calls that may wait at once; more get a 429 (each holds an open HTTP request).
MAX_WAITERS = 1000
#: What a call refused as the monitor stops is told: another monitor, or this one restarted.
RETRY = {"Retry-After": "5"}
#: The longest wait one call may ask for: proxies cut idle requests after a minute or so.
MAX_WAIT_SECONDS = 60.0


class WaitRefused(Exception):
    """No wait now: HTTP ``status`` and ``code``, ``why`` for the caller, and ``headers``."""

    def __init__(self, status: int, code: str, why: str, headers: dict[str, str]) -> None:
        super().__init__(why)
        self.status, self.code, self.why, self.headers = status, code, why, headers


class RunWaiters:
    """The calls waiting on runs, woken by the runs' events."""

    def __init__(self, limit: int = MAX_WAITERS) -> None:
        self.limit = limit
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._count = 0
        #: Set when the monitor stops: waiting calls answer at once, new ones are refused.
        self.closed = False

    @property
    def count(self) -> int:
        """How many calls wait now."""
        return self._count

    def is_closed(self) -> bool:
        """True once the monitor stops: a waiting call answers at once."""
        return self.closed

    def on_events(self, events: list[Event], _offset: int) -> None:
        """Wake the calls waiting on a run any of ``events`` belongs to."""
        for item in events:
            for woken in self._waiting.get(item.run_id or "", ()):
                woken.set()

    def close(self) -> None:
        """Wake every waiting call to answer now, and refuse new ones: the web server would
        wait up to a minute for them before the monitor stops."""
        self.closed = True
        for waiting in self._waiting.values():
            for woken in waiting:
                woken.set()

    @contextlib.contextmanager
    def watch(self, run_id: str) -> Iterator[asyncio.Event]:
        """An event set whenever ``run_id`` has a new event; 429 when too many wait, 503 once
        the monitor stops."""
        if self.closed:
            raise WaitRefused(503, "unavailable", "the monitor is stopping", RETRY)
        if self._count >= self.limit:
            why = f"{self.limit} calls are waiting on runs already: try again, or poll"
            raise WaitRefused(429, "throttled", why, {"Retry-After": "1"})
        woken = asyncio.Event()
        self._waiting.setdefault(run_id, set()).add(woken)
        self._count += 1
        try:
            yield woken
        finally:
            self._count -= 1
            mine = self._waiting[run_id]
            mine.discard(woken)
            if not mine:
                del self._waiting[run_id]
