"""The worker: consumes due tasks, runs them, retries failures through dead-lettering.

Register a handler in a module listed in ``CRON_HANDLER_MODULES``::

    from worker import PermanentError, TaskContext, task

    @task("send_report")
    async def send_report(payload: dict, ctx: TaskContext) -> None:
        ...

The names below load on first use, so that ``python -m worker.monitor``, a process of its
own, imports none of the worker's modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from topology.errors import MessageDecodeError, PermanentError, RetryableError, TaskError
    from worker.context import TaskContext
    from worker.registry import Registry, task

_HOMES = {
    "MessageDecodeError": "topology.errors",
    "PermanentError": "topology.errors",
    "RetryableError": "topology.errors",
    "TaskError": "topology.errors",
    "TaskContext": "worker.context",
    "Registry": "worker.registry",
    "task": "worker.registry",
}

__all__ = [
    "MessageDecodeError",
    "PermanentError",
    "Registry",
    "RetryableError",
    "TaskContext",
    "TaskError",
    "task",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'worker' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
