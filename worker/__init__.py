"""The worker: consumes due tasks, runs them, retries failures through dead-lettering.

Register a handler in a module listed in ``CRON_HANDLER_MODULES``::

    from worker import PermanentError, TaskContext, task

    @task("send_report")
    async def send_report(payload: dict, ctx: TaskContext) -> None:
        ...
"""

from worker.context import TaskContext
from worker.errors import MessageDecodeError, PermanentError, RetryableError, TaskError
from worker.registry import Registry, task

__all__ = [
    "MessageDecodeError",
    "PermanentError",
    "Registry",
    "RetryableError",
    "TaskContext",
    "TaskError",
    "task",
]
