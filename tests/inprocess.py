"""Services (workers, monitors) run as tasks of the test's event loop, and stopped together."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from warren_cron.runtime.process import Service
from warren_cron.worker.consumer import Worker
from warren_cron.worker.registry import Registry
from warren_cron.worker.settings import WorkerSettings


class ReadyService(Service, Protocol):
    """A service that says when it consumes (worker, monitor)."""

    ready: asyncio.Event


class InProcess:
    """Services (workers, monitors) run as tasks of the test's event loop, stopped together."""

    def __init__(self, start_timeout: float) -> None:
        self._start_timeout = start_timeout
        self._started: list[tuple[ReadyService, asyncio.Task[None]]] = []

    async def start(self, service: ServiceT) -> ServiceT:
        """Run ``service`` and wait until it is ready (or raise why it could not start)."""
        task = asyncio.create_task(service.run())
        self._started.append((service, task))
        ready = asyncio.create_task(service.ready.wait())
        await asyncio.wait(
            {ready, task}, timeout=self._start_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if task.done():
            ready.cancel()
            task.result()
        return service

    async def stop_all(self, timeout: float) -> None:
        """Stop every service started and wait for each to finish."""
        for service, task in self._started:
            service.stop()
            await asyncio.wait_for(task, timeout)


ServiceT = TypeVar("ServiceT", bound=ReadyService)


class InProcessWorkers(InProcess):
    """Workers run in-process, with settings from ``settings``."""

    def __init__(self, settings: Callable[..., WorkerSettings], start_timeout: float) -> None:
        super().__init__(start_timeout)
        self._settings = settings

    async def start_worker(self, registry: Registry | None = None, **overrides: Any) -> Worker:
        """Start a worker and wait until it consumes (or raise why it could not)."""
        return await self.start(Worker(self._settings(**overrides), registry))
