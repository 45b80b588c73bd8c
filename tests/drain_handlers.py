"""Handlers of the shutdown tests (CRON_HANDLER_MODULES=tests.drain_handlers): each finished
attempt writes its run id to the ledger file named by WARREN_TEST_LEDGER."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from warren_cron import TaskContext, task


@task("nap")
async def nap(payload: Any, ctx: TaskContext) -> None:
    """Sleep ``payload['seconds']``, then record the run as done."""
    ctx.log.info("nap started")
    await asyncio.sleep(float(payload["seconds"]))
    await asyncio.to_thread(record, os.environ["WARREN_TEST_LEDGER"], ctx.run_id)


def record(path: str, run_id: str) -> None:
    """Append one line: O_APPEND keeps the lines of concurrent attempts whole."""
    with open(path, "a", encoding="utf-8") as ledger:
        ledger.write(run_id + "\n")
