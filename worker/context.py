"""What a handler knows about the attempt it is running."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import structlog


@dataclass(frozen=True, slots=True)
class TaskContext:
    """The attempt being run: identity of the fire, attempt number, and a bound logger."""

    run_id: str
    task: str
    schedule: str | None
    scheduled_for: datetime
    attempt: int
    redelivered: bool
    timeout_seconds: float
    log: structlog.typing.FilteringBoundLogger


class AsyncHandler(Protocol):
    """A coroutine function ``async def handler(payload, ctx)``."""

    async def __call__(self, payload: Any, ctx: TaskContext) -> object:
        """Run the task; raise ``PermanentError`` to fail it for good."""


class SyncHandler(Protocol):
    """A plain function ``def handler(payload, ctx)``, run in a thread."""

    def __call__(self, payload: Any, ctx: TaskContext) -> object:
        """Run the task; raise ``PermanentError`` to fail it for good."""
