"""The sync client: the async one on an event loop of its own, in a background thread.

For code without an event loop (a Flask or Django view, a script, a worker thread): every
call is handed to that loop and waited for, so any number of threads may share one client.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from datetime import datetime
from typing import Any, TypeVar, Unpack

from warren_cron.cancel.request import CancelAnswer
from warren_cron.client.client import Client
from warren_cron.client.options import Enqueued, EnqueueOptions
from warren_cron.client.runs import RunHandle
from warren_cron.client.schedules import SyncScheduleMethods
from warren_cron.history.lifecycle import RunStatus
from warren_cron.runtime.settings import CronSettings

T = TypeVar("T")


class SyncClient(SyncScheduleMethods):
    """``with SyncClient() as client: client.enqueue("http", {...}, delay=90)``.

    A call that takes longer than ``timeout`` seconds raises ``TimeoutError`` and is
    cancelled. A timed-out enqueue may or may not have reached the broker (at least once):
    retry it with the same ``key`` to be sure it is not sent twice.
    """

    def __init__(
        self,
        settings: CronSettings | None = None,
        *,
        name: str = "warren-client",
        timeout: float = 30.0,
    ) -> None:
        self._client = Client(settings, name=name)
        self._timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def __enter__(self) -> SyncClient:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, coroutine: Coroutine[Any, Any, T], wait: float | None = None) -> T:
        if self._loop.is_closed():
            coroutine.close()
            raise RuntimeError("this SyncClient is closed: make a new one")
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(wait or self._timeout)
        except TimeoutError:
            # Left running, it could still send the task after the caller was told it failed.
            future.cancel()
            raise

    def connect(self) -> None:
        """Connect and declare the topology now rather than at the first enqueue."""
        self._call(self._client.connect())

    def enqueue(
        self, task: str, payload: Any = None, **options: Unpack[EnqueueOptions]
    ) -> Enqueued:
        """``Client.enqueue``, waited for: returns once the broker confirmed the task, or
        raises ``TimeoutError`` after ``timeout`` seconds (the task may have been sent)."""
        return self._call(self._client.enqueue(task, payload, **options))

    def run(self, run: str | Enqueued) -> SyncRunHandle:
        """``Client.run``: a handle on one run, by its id or by what ``enqueue`` returned."""
        return SyncRunHandle(self, self._client.run(run))

    def close(self) -> None:
        """Close the connection and stop the background loop."""
        if self._loop.is_closed():
            return
        try:
            self._call(self._client.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(self._timeout)
            self._loop.close()


class SyncRunHandle:
    """``RunHandle`` for code without an event loop: ``client.run(run_id).result(timeout=60)``."""

    def __init__(self, client: SyncClient, handle: RunHandle) -> None:
        self._client = client
        self._handle = handle
        self.run_id = handle.run_id

    def status(self) -> RunStatus:
        """Where the run stands now: its state and every attempt."""
        return self._client._call(self._handle.status())

    def cancel(
        self, reason: str | None = None, *, by: str | None = None, until: datetime | None = None
    ) -> CancelAnswer:
        """Cancel the run (``RunHandle.cancel``), waited for."""
        return self._client._call(self._handle.cancel(reason, by=by, until=until))

    def result(self, timeout: float | None = None) -> Any:
        """Wait for the run to end and return its result (``RunHandle.result``); with no
        ``timeout``, wait as long as the client's own timeout."""
        waited = self._client._timeout if timeout is None else timeout
        # The call outlives the wait, so that the run's own RunTimeout is what the caller sees.
        return self._client._call(self._handle.result(waited), waited + self._client._timeout)
