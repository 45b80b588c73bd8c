"""The run page of a run the dashboard does not keep: read from the stream, from where the
dashboard's index says its time begins, and no further than its story can go."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest
from aio_pika.abc import AbstractConnection

from tests.dashboard import free_port
from tests.helpers import fired_and_tried, write_history
from tests.namespace import TestBroker
from warren_cron.clock import utc_text, utcnow
from warren_cron.faultkit.waits import eventually
from warren_cron.history.events import event
from warren_cron.history.reader import Budget, Start, read_messages
from warren_cron.history.recent import CLOCK_SLACK, one_run
from warren_cron.history.run_fold import Run
from warren_cron.monitor.console.recent import PER_SCHEDULE
from warren_cron.ops import runs

pytestmark = pytest.mark.broker


def runs_of(schedule: str, first: datetime, count: int) -> list[list[dict[str, Any]]]:
    """One message per minute from ``first`` on, each holding one succeeded run."""
    moments = (first + timedelta(minutes=n) for n in range(count))
    return [fired_and_tried(f"{schedule}@{utc_text(at)}", at, "succeeded") for at in moments]


async def test_a_run_not_kept_is_read_from_its_minute_in_the_stream_and_shown_whole(
    broker: TestBroker, run_monitor: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old plain success, no longer among its schedule's last runs, is read from the
    offset the index gives for shortly before its time (the stream timestamps, all of one
    burst, tell nothing), shown whole, and its read stops past its end: an event published
    long after it is not on the page."""
    at = utcnow().replace(second=0, microsecond=0) - timedelta(hours=2)
    run_id, slack = f"tick@{utc_text(at)}", int(CLOCK_SLACK.total_seconds() // 60)
    after = slack + PER_SCHEDULE
    late = at + timedelta(minutes=after + 1)
    await write_history(
        broker,
        *runs_of("other", at - 2 * CLOCK_SLACK, 2 * slack),
        fired_and_tried(run_id, at, "succeeded"),
        *runs_of("tick", at + timedelta(minutes=1), after),
        [event("purged", at=late, run_id=run_id, by="late@test"), event("fired", run_id="tail@x")],
    )
    stream = broker.names.history_stream
    offsets = [offset async for offset, body in read_messages(broker.connection, stream)]
    starts: list[Start] = []

    async def spied(
        connection: AbstractConnection, name: str, run: str, start: Start, budget: Budget
    ) -> Run | None:
        starts.append(start)
        return await one_run(connection, name, run, start, budget)

    monkeypatch.setattr(runs, "one_run", spied)
    monitor = await run_monitor(dashboard_port=free_port())
    dashboard = monitor.dashboard
    await eventually(lambda: "tail@x" in dashboard.recent.runs, 10, what="the history followed")
    assert dashboard.recent.whole(run_id) is None, "not kept: the page reads the stream"
    url = f"{dashboard.url}runs/{quote(run_id)}"
    async with aiohttp.ClientSession() as http, http.get(url) as answer:
        assert answer.status == 200
        page = await answer.text()
    assert starts == [offsets[slack]], "the first message of CLOCK_SLACK before the run"
    assert page.count('<li class="t-') == 2 and "o-succeeded" in page
    assert "late@test" not in page and "record purged" not in page
