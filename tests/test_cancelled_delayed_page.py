"""A delayed run cancelled before its time reads cancelled on the dashboard, with no start in
the future: its page and the runs list, on a real broker and monitor."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from tests.dashboard import free_port
from tests.namespace import TestBroker
from tests.test_cancel_command import fired_ahead
from warren_cron.client import Client
from warren_cron.faultkit.waits import eventually
from warren_cron.monitor import Monitor

pytestmark = pytest.mark.broker


async def text_of(url: str) -> tuple[int, str]:
    """A page's status and its text, tags and spaces collapsed."""
    async with aiohttp.ClientSession() as http, http.get(url) as got:
        page = await got.text()
    return got.status, " ".join(re.sub(r"<[^>]+>", " ", page).split())


async def test_delayed_runs_cancelled_before_their_time_read_cancelled_and_never_began(
    broker: TestBroker, client: Client, run_monitor: Any
) -> None:
    """A one-off enqueued an hour ahead and a schedule's run triggered for an hour ahead,
    both cancelled: each page reads "cancelled after 0 attempt(s), before it began" with no
    time from fire to end, and each row of /runs shows no start ("in 59m") and no time."""
    monitor: Monitor = await run_monitor(dashboard_port=free_port())
    assert monitor.dashboard is not None and monitor.dashboard.url is not None
    url = monitor.dashboard.url
    one_off = (await client.enqueue("job", delay=3600)).run_id
    [ahead] = await fired_ahead(client, "nightly")
    for run_id in (one_off, ahead):
        assert (await client.run(run_id).cancel("wrong day", by="alice")).cancelled
        page = url + "runs/" + quote(run_id, safe="")

        async def told(page: str = page) -> str | None:
            status, text = await text_of(page)
            return text if status == 200 and "cancelled by alice" in text else None

        shown = await eventually(told, 15, what="the run page to tell the cancel")
        assert shown is not None
        assert "outcome cancelled after 0 attempt(s), before it began" in shown
        assert "from fire to end" not in shown and " in 59m" not in shown
    _, listed = await text_of(url + "runs")
    for run_id, schedule in ((one_off, "-"), (ahead, "nightly")):
        cells = listed[listed.index(run_id) :].split()[1:8]
        assert cells == [
            schedule,
            "-" if run_id == one_off else "job",
            "0",
            "cancelled",
            "-",
            "-",
            "wrong",
        ], cells
