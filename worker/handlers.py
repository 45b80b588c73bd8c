"""Built-in handlers and the registry a worker starts with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from warren_cron.worker.context import TaskContext
from warren_cron.worker.destinations import warn_if_metadata_reachable
from warren_cron.worker.registry import Registry, default_registry

if TYPE_CHECKING:
    import aiohttp

    from warren_cron.worker.http import HttpHandler
    from warren_cron.worker.settings import WorkerSettings


async def noop(payload: Any, ctx: TaskContext) -> None:
    """Do nothing and succeed: for smoke tests and benchmarks."""


class LazyHttp:
    """The ``http`` handler; aiohttp and its connection pool load on the first http task."""

    #: Each request is bounded by ``ctx.timeout_seconds`` (or the payload's shorter timeout)
    #: from its connect to the last byte of its answer; the work before it does not wait.
    times_itself: ClassVar[bool] = True

    def __init__(self, settings: WorkerSettings) -> None:
        self._settings = settings
        # At the worker's start, where an operator reads its log, not at the first http task.
        warn_if_metadata_reachable(settings.destination_policy())
        self._session: aiohttp.ClientSession | None = None
        self._handler: HttpHandler | None = None

    async def __call__(self, payload: Any, ctx: TaskContext) -> dict[str, int]:
        """Call the webhook the payload names (see ``worker.http``)."""
        if self._handler is None:
            # Deferred: a worker that never runs an http task starts without importing aiohttp.
            from warren_cron.worker.http import HttpHandler, http_options, new_session

            options = http_options(self._settings)
            self._session = new_session(options.policy)
            self._handler = HttpHandler(self._session, options)
        return await self._handler(payload, ctx)

    async def aclose(self) -> None:
        """Close the connection pool, if one was made."""
        if self._session is not None:
            await self._session.close()


def builtin_registry(http: LazyHttp) -> Registry:
    """Registry with ``http`` and ``noop`` plus every handler registered with ``@task``."""
    builtins = Registry()
    builtins.register("noop", noop)
    builtins.register("http", http)
    return builtins.merged(default_registry)
