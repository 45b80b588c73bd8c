"""Built-in handlers and the registry a worker starts with."""

from __future__ import annotations

from typing import Any

import httpx

from worker.context import TaskContext
from worker.http import HttpHandler
from worker.registry import Registry, default_registry


async def noop(payload: Any, ctx: TaskContext) -> None:
    """Do nothing and succeed: for smoke tests and benchmarks."""


def builtin_registry(client: httpx.AsyncClient) -> Registry:
    """Registry with ``http`` and ``noop`` plus every handler registered with ``@task``."""
    builtins = Registry()
    builtins.register("noop", noop)
    builtins.register("http", HttpHandler(client))
    return builtins.merged(default_registry)
