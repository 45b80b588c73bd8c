"""The worker: consumes due tasks, runs them, retries failures through dead-lettering.

Register a handler in a module listed in ``CRON_HANDLER_MODULES``::

    from warren_cron.worker import PermanentError, TaskContext, task

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
    from warren_cron.errors import MessageDecodeError, PermanentError, RetryableError, TaskError
    from warren_cron.worker.context import TaskContext
    from warren_cron.worker.registry import Registry, task

_HOMES = {
    "MessageDecodeError": "warren_cron.errors",
    "PermanentError": "warren_cron.errors",
    "RetryableError": "warren_cron.errors",
    "TaskError": "warren_cron.errors",
    "TaskContext": "warren_cron.worker.context",
    "Registry": "warren_cron.worker.registry",
    "task": "warren_cron.worker.registry",
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
