"""The ledger handler: records every attempt, then behaves as its payload says.

Worker processes register it with ``CRON_HANDLER_MODULES=warren_cron.faultkit.worker_tasks``
and find the ledger file in ``WARREN_TEST_LEDGER``. Payload fields (all optional):

- ``fails``: fail with a retryable error while the attempt number is at most this (-1: always);
- ``permanent``: fail with ``PermanentError``;
- ``permanent_while``: fail with ``PermanentError`` while this file exists (then replay it);
- ``seconds``: sleep this long first (a task that is still running when something breaks);
- ``suicide``: ``kill -9`` the worker's own process, every time.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

from warren_cron.errors import PermanentError
from warren_cron.faultkit.ledger import Ledger
from warren_cron.worker.context import TaskContext

LEDGER_ENV = "WARREN_TEST_LEDGER"


class TransientFailure(RuntimeError):
    """The failure of an attempt that a later attempt may pass."""


class LedgerHandler:
    """Records each attempt in the ledger before and after running it."""

    def __init__(self, ledger: Ledger | None = None) -> None:
        self._ledger = ledger

    def ledger(self) -> Ledger:
        """The ledger, opened on first use from ``WARREN_TEST_LEDGER``."""
        if self._ledger is None:
            self._ledger = Ledger(Path(os.environ[LEDGER_ENV]))
        return self._ledger

    async def __call__(self, payload: Any, ctx: TaskContext) -> None:
        """Record the attempt, behave as the payload says, record how it ended."""
        ledger = self.ledger()
        row = ledger.attempt_started(ctx.run_id, os.getpid(), ctx.attempt, ctx.redelivered)
        try:
            await behave(payload or {}, ctx)
        except PermanentError:
            ledger.attempt_ended(row, "permanent")
            raise
        except TransientFailure:
            ledger.attempt_ended(row, "retryable")
            raise
        except asyncio.CancelledError:
            ledger.attempt_ended(row, "interrupted")
            raise
        ledger.attempt_ended(row, "ok")


async def behave(payload: dict[str, Any], ctx: TaskContext) -> None:
    """Sleep, kill the process, or fail, as ``payload`` asks."""
    if payload.get("seconds"):
        await asyncio.sleep(float(payload["seconds"]))
    if payload.get("suicide"):
        os.kill(os.getpid(), signal.SIGKILL)
        await asyncio.sleep(60)  # the signal arrives before this ends
    flag = payload.get("permanent_while")
    if payload.get("permanent") or (flag and await asyncio.to_thread(Path(flag).exists)):
        raise PermanentError("this task fails for good")
    fails = int(payload.get("fails", 0))
    if fails < 0 or ctx.attempt <= fails:
        raise TransientFailure(f"transient failure on attempt {ctx.attempt}")
