"""Built-in handlers and the registry a worker starts with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from worker.context import TaskContext
from worker.registry import Registry, default_registry

if TYPE_CHECKING:
    import httpx

    from worker.http import HttpHandler


async def noop(payload: Any, ctx: TaskContext) -> None:
    """Do nothing and succeed: for smoke tests and benchmarks."""


class LazyHttp:
    """The ``http`` handler; httpx and its connection pool load on the first http task."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None
        self._handler: HttpHandler | None = None

    async def __call__(self, payload: Any, ctx: TaskContext) -> dict[str, int]:
        """Call the webhook the payload names (see ``worker.http``)."""
        if self._handler is None:
            # Deferred: a worker that never runs an http task starts without importing httpx.
            import httpx

            from worker.http import HttpHandler

            self._client = httpx.AsyncClient(follow_redirects=False)
            self._handler = HttpHandler(self._client)
        return await self._handler(payload, ctx)

    async def aclose(self) -> None:
        """Close the connection pool, if one was made."""
        if self._client is not None:
            await self._client.aclose()


def builtin_registry(http: LazyHttp) -> Registry:
    """Registry with ``http`` and ``noop`` plus every handler registered with ``@task``."""
    builtins = Registry()
    builtins.register("noop", noop)
    builtins.register("http", http)
    return builtins.merged(default_registry)
