"""Test your jobs without a broker: run a task as a worker would, enqueue eagerly.

::

    from warren_cron.testing import run_task

    async def test_a_report_without_customer_fails_for_good() -> None:
        run = await run_task("send_report", {})
        assert (run.state, run.reason) == ("failed", "invalid-payload")

``run_task`` (``Kit.run``) runs the worker's own attempt and fate on a virtual clock;
``EagerClient`` and ``SyncEagerClient`` run each task they are given in the test. Installing
warren-cron gives pytest the fixtures ``warren_eager`` (handles enqueue eagerly) and
``warren_broker`` (a namespace of its own on a real RabbitMQ, deleted after the test).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from warren_cron.testing.eager import EagerClient, EagerLoop, SyncEagerClient
    from warren_cron.testing.runner import Attempt, Kit, TaskRun, run_task
    from warren_cron.worker.handles import use_clients

# Loaded on first use: pytest imports this package for its plugin in every test session.
_HOMES = {
    "Attempt": "warren_cron.testing.runner",
    "Kit": "warren_cron.testing.runner",
    "TaskRun": "warren_cron.testing.runner",
    "run_task": "warren_cron.testing.runner",
    "EagerClient": "warren_cron.testing.eager",
    "EagerLoop": "warren_cron.testing.eager",
    "SyncEagerClient": "warren_cron.testing.eager",
    "use_clients": "warren_cron.worker.handles",
}

__all__ = [
    "Attempt",
    "EagerClient",
    "EagerLoop",
    "Kit",
    "SyncEagerClient",
    "TaskRun",
    "run_task",
    "use_clients",
]


def __getattr__(name: str) -> Any:
    """Load a name of the kit from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'warren_cron.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    """The kit's names."""
    return list(__all__)
