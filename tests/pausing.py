"""Helpers of the pause, resume and trigger tests: the script, and events in the history."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

from tests.failed_records import run_warren
from tests.helpers import wait_history
from tests.namespace import TestBroker
from warren_cron.history.events import Event


async def schedules_script(
    broker: TestBroker, path: Path, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``warren schedules`` on the schedules file ``path`` (in a thread: the test's
    event loop, and any scheduler in it, keeps running)."""
    return await asyncio.to_thread(
        run_warren, broker, "schedules", *args, CRON_SCHEDULES_FILE=str(path), **env
    )


def matching(events: list[Event], **fields: Any) -> list[Event]:
    """The events whose fields (``type`` among them) have these values."""
    return [e for e in events if all(e.get(key) == value for key, value in fields.items())]


async def wait_events(
    broker: TestBroker, count: int = 1, timeout: float = 15, **fields: Any
) -> list[Event]:
    """Wait until the history holds ``count`` events with these fields; returns them all."""
    events = await wait_history(
        broker,
        lambda events: len(matching(events, **fields)) >= count,
        f"{count} event(s) {fields}",
        timeout,
    )
    return matching(events, **fields)
