"""The overview's "runs retrying" counts what waits in the retry queues and the delay levels,
one-off runs and scheduled alike, on a real broker, worker and monitor."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.dashboard import free_port
from tests.helpers import registry
from tests.namespace import TestBroker
from tests.scheduling import write_schedules
from warren_cron.client import Client
from warren_cron.errors import RetryableError
from warren_cron.faultkit.waits import eventually
from warren_cron.history.publisher import publishing
from warren_cron.monitor import Monitor
from warren_cron.schedules import commands
from warren_cron.worker.context import TaskContext

pytestmark = pytest.mark.broker
#: One retry, ten minutes on: a failed first attempt sits in the retry queue all the test.
PLAN = "10m"
SCHEDULES = """
[[schedule]]
name = "nightly"
cron = "30 2 * * *"
task = "flaky"
retry = { max_retries = 1, delay_ms = 600000 }
"""


async def flaky(payload: Any, ctx: TaskContext) -> None:
    """Fails in a way worth retrying."""
    raise RetryableError("the endpoint said 503")


async def retrying_card(url: str) -> str | None:
    """The overview's "runs retrying" card as text, tags and spaces collapsed."""
    async with aiohttp.ClientSession() as http, http.get(url) as got:
        page = await got.text()
    found = re.search(r'<a class="card[^"]*" id="retrying".*?</a>', page, re.S)
    return None if found is None else " ".join(re.sub(r"<[^>]+>", " ", found.group(0)).split())


async def test_the_overview_counts_one_off_scheduled_and_delayed_runs_waiting_to_retry(
    broker: TestBroker, client: Client, run_worker: Any, run_monitor: Any, tmp_path: Path
) -> None:
    """Two one-off runs and a scheduled one failed once and wait ten minutes in the retry
    queue; a one-off enqueued with a delay waits in the delay levels: the card reads 4 runs
    retrying, 3 in retry queues and 1 in delay levels (the history alone knew of 1)."""
    schedules = write_schedules(broker, tmp_path / "schedules.toml", SCHEDULES)
    monitor: Monitor = await run_monitor(schedules=schedules.schedules, dashboard_port=free_port())
    assert monitor.dashboard is not None and monitor.dashboard.url is not None
    await run_worker(registry(flaky=flaky))
    for _ in range(2):
        await client.enqueue("flaky", plan=PLAN)
    await client.enqueue("flaky", delay=3600)
    [nightly] = schedules.schedules
    async with publishing(broker.connection, broker.names, monitor.settings, "test") as told:
        await commands.trigger(broker.connection, monitor.settings, nightly, told, "tester")
    expected = "4 runs retrying 3 in retry queues, 1 in delay levels"
    url = monitor.dashboard.url

    async def counted() -> str | None:
        card = await retrying_card(url)
        return card if card == expected else None

    await eventually(counted, 20, what=f"the card to read {expected!r}")
    retrying = broker.names.retry_queue(nightly.plan.key)
    assert await broker.depth(retrying) == 3
