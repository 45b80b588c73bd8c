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

from typing import Any, Unpack

from warren_cron.client.options import EnqueueOptions
from warren_cron.testing.eager import EagerClient, SyncEagerClient
from warren_cron.testing.runner import Attempt, Kit, TaskRun
from warren_cron.worker.handles import TaskHandle, use_clients

__all__ = [
    "Attempt",
    "EagerClient",
    "Kit",
    "SyncEagerClient",
    "TaskRun",
    "run_task",
    "use_clients",
]


async def run_task(
    task: TaskHandle[Any, Any] | str,
    payload: Any = None,
    *,
    cancel_at: int | None = None,
    **options: Unpack[EnqueueOptions],
) -> TaskRun:
    """Run ``task`` to its end as a worker would, in process (``Kit.run``)."""
    async with Kit() as kit:
        return await kit.run(task, payload, cancel_at=cancel_at, **options)
