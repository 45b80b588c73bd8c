"""warren: cron jobs on RabbitMQ with dead-letter retries.

What an application or a handler module imports, all from here::

    from warren_cron import PermanentError, TaskContext, task

    @task("send_report")
    async def send_report(payload: dict, ctx: TaskContext) -> None:
        ...

    from warren_cron import SyncClient

    with SyncClient() as client:
        print(client.enqueue("send_report", {"customer": 42}, delay=90).run_id)

Only the names in ``__all__`` are the public API; the subpackages (``worker``, ``scheduler``,
``monitor``, ``cli``, and the shared contract beside them) are the processes' own code.
The names load on first use, so that a process imports only what it runs: the monitor none of
the worker's modules, ``warren --help`` none of the broker's.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from warren_cron.client import Client, Enqueued, EnqueueOptions, SyncClient
    from warren_cron.errors import (
        BrokerError,
        BrokerUnavailable,
        ConfigError,
        EnqueueError,
        MessageDecodeError,
        PermanentError,
        RetryableError,
        TaskError,
        WarrenError,
    )
    from warren_cron.plan import RetryPlan
    from warren_cron.signing import SignatureError, sign, verify_signature
    from warren_cron.worker.context import TaskContext
    from warren_cron.worker.registry import Registry, task

_HOMES = {
    "Client": "warren_cron.client",
    "Enqueued": "warren_cron.client",
    "EnqueueOptions": "warren_cron.client",
    "SyncClient": "warren_cron.client",
    "BrokerError": "warren_cron.errors",
    "BrokerUnavailable": "warren_cron.errors",
    "ConfigError": "warren_cron.errors",
    "EnqueueError": "warren_cron.errors",
    "MessageDecodeError": "warren_cron.errors",
    "PermanentError": "warren_cron.errors",
    "RetryableError": "warren_cron.errors",
    "TaskError": "warren_cron.errors",
    "WarrenError": "warren_cron.errors",
    "RetryPlan": "warren_cron.plan",
    "SignatureError": "warren_cron.signing",
    "sign": "warren_cron.signing",
    "verify_signature": "warren_cron.signing",
    "TaskContext": "warren_cron.worker.context",
    "Registry": "warren_cron.worker.registry",
    "task": "warren_cron.worker.registry",
}

__all__ = [
    "BrokerError",
    "BrokerUnavailable",
    "Client",
    "ConfigError",
    "EnqueueError",
    "EnqueueOptions",
    "Enqueued",
    "MessageDecodeError",
    "PermanentError",
    "Registry",
    "RetryPlan",
    "RetryableError",
    "SignatureError",
    "SyncClient",
    "TaskContext",
    "TaskError",
    "WarrenError",
    "sign",
    "task",
    "verify_signature",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'warren_cron' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    """The public names, for ``dir()`` and completion."""
    return list(__all__)
