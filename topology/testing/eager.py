"""Eager clients: an enqueue runs its task in the test, as a worker would, with no broker.

A task enqueued while another runs (a handler that enqueues) waits until that one ended, then
runs, in order: a handler that enqueues itself runs again and again, never deeper on the
stack, until ``max_runs`` runs in one enqueue stop it with ``EagerLoop``. Delays and due
times are recorded, not waited for. A run that fails (after its retries, on the virtual
clock) makes the enqueue that ran it raise ``RunFailed``, unless ``raise_failures=False``.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any, Unpack

from warren_cron.client.options import Enqueued, EnqueueOptions
from warren_cron.envelope import Envelope
from warren_cron.errors import RunFailed, WarrenError
from warren_cron.testing.runner import Kit, TaskRun
from warren_cron.worker.handles import use_clients


class EagerLoop(WarrenError):
    """Too many runs in one eager enqueue: handlers enqueue each other without end."""


class EagerRun:
    """A run handle of an eager client: its result is known once the enqueue returned."""

    def __init__(self, client: EagerClient, run_id: str) -> None:
        self._client = client
        self.run_id = run_id

    def ended(self) -> TaskRun:
        """The run as it ended; ``KeyError`` naming the run when no eager enqueue ran it."""
        try:
            return self._client.runs[self.run_id]
        except KeyError:
            raise KeyError(f"run {self.run_id!r} was not enqueued through this client") from None

    def value(self) -> Any:
        """The handler's return value, or ``RunFailed`` as ``Client.run().result()`` says."""
        run = self.ended()
        if run.state != "succeeded":
            raise RunFailed(run.run_id, run.state, run.error or run.reason)
        return run.result

    async def result(self, timeout: float | None = None) -> Any:  # noqa: ASYNC109 - as the client's
        """The run's result (``RunHandle.result``); nothing to wait for."""
        return self.value()


class EagerClient:
    """``Client`` for tests: ``await client.enqueue(task, payload)`` runs the task now."""

    def __init__(
        self, kit: Kit | None = None, *, raise_failures: bool = True, max_runs: int = 1000
    ) -> None:
        self.kit = kit or Kit()
        self.raise_failures = raise_failures
        self.max_runs = max_runs
        #: Every run, by run id, as it ended.
        self.runs: dict[str, TaskRun] = {}
        #: Every task enqueued, in order: (task, payload as sent, options).
        self.enqueued: list[tuple[str, Any, EnqueueOptions]] = []
        self._waiting: deque[tuple[Envelope, str]] = deque()
        self._keys: set[str] = set()
        self._lock = threading.Lock()
        self.draining = False

    async def __aenter__(self) -> EagerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.kit.aclose()

    def submit(self, task: str, payload: Any, options: EnqueueOptions) -> Enqueued:
        """Check and queue one task as ``Client.enqueue`` would send it, without running it."""
        envelope, plan_key = self.kit.envelope(task, payload, options)
        key = options.get("key")
        with self._lock:
            if key is not None and key in self._keys:
                return Enqueued(envelope.run_id, None, created=False)
            if key is not None:
                self._keys.add(key)
            self.enqueued.append((task, payload, options))
            self._waiting.append((envelope, plan_key))
        return Enqueued(envelope.run_id, envelope.scheduled_for)

    async def drain(self, kit: Kit | None = None) -> list[TaskRun]:
        """Run every queued task, and those they enqueue, to their ends."""
        ran: list[TaskRun] = []
        self.draining = True
        try:
            # A handler's own enqueues through handles come back here, never to a broker.
            with use_clients(self, Submitter(self)):
                await self.run_waiting(kit or self.kit, ran)
        finally:
            self.draining = False
        self.check(ran)
        return ran

    async def run_waiting(self, kit: Kit, ran: list[TaskRun]) -> None:
        """Run the queued tasks in order, those enqueued meanwhile too, up to ``max_runs``."""
        while self._waiting:
            if len(ran) >= self.max_runs:
                self._waiting.clear()
                raise EagerLoop(
                    f"{len(ran)} runs in one eager enqueue, the last of task "
                    f"{ran[-1].task!r}: do handlers enqueue each other without end? "
                    "(raise max_runs if they are meant to)"
                )
            envelope, plan_key = self._waiting.popleft()
            run = await kit.run_envelope(envelope, plan_key)
            self.runs[run.run_id] = run
            ran.append(run)

    def check(self, ran: list[TaskRun]) -> None:
        """``RunFailed`` for the first run that did not succeed, if failures are raised."""
        failed = next((run for run in ran if run.state != "succeeded"), None)
        if failed is not None and self.raise_failures:
            raise RunFailed(failed.run_id, failed.state, failed.error or failed.reason)

    async def enqueue(
        self, task: str, payload: Any = None, **options: Unpack[EnqueueOptions]
    ) -> Enqueued:
        """Run the task now (or, from a running handler, once it ended); ``Client.enqueue``'s
        checks and answer."""
        done = self.submit(task, payload, options)
        if not self.draining:
            await self.drain()
        return done

    def run(self, run: str | Enqueued) -> EagerRun:
        """A handle on one run, by id or by what ``enqueue`` returned."""
        return EagerRun(self, run.run_id if isinstance(run, Enqueued) else run)


class SyncEagerClient:
    """``SyncClient`` for tests, over an ``EagerClient`` whose records it shares; the tasks
    run on an event loop of its own, in a background thread, as ``SyncClient``'s calls do."""

    def __init__(self, eager: EagerClient | None = None) -> None:
        self.eager = eager or EagerClient()
        self._kit = Kit(self.eager.kit.settings, self.eager.kit.registry)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def __enter__(self) -> SyncEagerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def enqueue(
        self, task: str, payload: Any = None, **options: Unpack[EnqueueOptions]
    ) -> Enqueued:
        """``EagerClient.enqueue`` without an event loop."""
        done = self.eager.submit(task, payload, options)
        if not self.eager.draining:
            asyncio.run_coroutine_threadsafe(self.eager.drain(self._kit), self._loop).result()
        return done

    def run(self, run: str | Enqueued) -> SyncEagerRun:
        """A handle on one run, by id or by what ``enqueue`` returned."""
        return SyncEagerRun(self.eager.run(run))

    def close(self) -> None:
        """Close the http task's pool and stop the background loop."""
        if self._loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self._kit.aclose(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


class Submitter:
    """The sync face of an eager client while it runs tasks: an enqueue only queues."""

    def __init__(self, eager: EagerClient) -> None:
        self.eager = eager

    def enqueue(
        self, task: str, payload: Any = None, **options: Unpack[EnqueueOptions]
    ) -> Enqueued:
        """Queue the task; the running drain runs it after the current one."""
        return self.eager.submit(task, payload, options)

    def run(self, run: str | Enqueued) -> SyncEagerRun:
        """A handle on one run."""
        return SyncEagerRun(self.eager.run(run))


class SyncEagerRun:
    """``EagerRun`` for code without an event loop."""

    def __init__(self, run: EagerRun) -> None:
        self._run = run
        self.run_id = run.run_id

    def result(self, timeout: float | None = None) -> Any:
        """The run's result, or ``RunFailed``."""
        return self._run.value()


__all__ = ["EagerClient", "EagerLoop", "EagerRun", "SyncEagerClient"]
