"""A long run's heartbeats as every surface shows them, on a real broker and monitor: the
client's ``status()``, ``warren runs show``, the API, the run page and the overview say
``running`` with the last progress, through a hand-over to another worker, and escape it."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest

from tests.api import Api, bearer
from tests.namespace import TestBroker
from tests.test_runs_command import warren
from warren_cron.client import Client
from warren_cron.clock import utcnow
from warren_cron.faultkit.waits import eventually
from warren_cron.history.events import event
from warren_cron.history.publisher import HistoryPublisher

pytestmark = pytest.mark.broker

RUN = "once:export@2026-11-28T00:00:00Z-long"
#: A progress value a hostile handler could give: the pages must show it as text.
HOSTILE = {"done": 120, "of": 900, "note": "<script>alert(1)</script>"}


async def written(broker: TestBroker, *events: tuple[str, dict[str, Any]]) -> None:
    """Write ``events`` of the run ``RUN`` to the history stream, a second apart."""
    publisher = HistoryPublisher(broker.names, broker.settings(), "test", metrics=False)
    await publisher.start(broker.connection)
    start = utcnow() - timedelta(seconds=len(events))
    for n, (kind, fields) in enumerate(events):
        at = start + timedelta(seconds=n)
        publisher.emit(event(kind, at=at, run_id=RUN, task="export", **fields))  # type: ignore[arg-type]
    await eventually(lambda: publisher.published >= len(events), 30, what="events sent")
    await publisher.close()


def beat(pid: int, done: int, heartbeats: int) -> tuple[str, dict[str, Any]]:
    """A ``progress`` event of attempt 1 on worker ``w:pid``."""
    progress = {**HOSTILE, "done": done}
    fields = {"attempt": 1, "progress": progress, "heartbeats": heartbeats, "host": "w", "pid": pid}
    return "progress", fields


async def page_text(api: Api, path: str) -> tuple[str, str]:
    """A page's HTML as a viewer gets it, and its text with tags and spaces collapsed."""
    root = api.url.removesuffix("api/v1")
    async with api.http.get(root + path, headers=bearer("viewer")) as got:
        assert got.status == 200, path
        html = await got.text()
    return html, " ".join(re.sub(r"<[^>]+>", " ", html).split())


async def test_a_long_run_reads_running_with_its_progress_everywhere_across_a_hand_over(
    broker: TestBroker, client: Client, api: Api
) -> None:
    """Started on w:1, two summaries, its claim lost, started again on w:2 with a third:
    every surface says running, attempt 1 on w:2, the last progress; its end takes it off
    the overview, and the pages never carry the progress's markup as markup."""
    claim_lost = {"attempt": 1, "outcome": "replaced", "reason": "claim-lost", "host": "w"}
    await written(
        broker,
        ("started", {"attempt": 1, "host": "w", "pid": 1}),
        beat(1, 100, 10),
        beat(1, 200, 20),
        ("attempt", {**claim_lost, "pid": 1, "error": "lost its claim"}),
        ("started", {"attempt": 1, "host": "w", "pid": 2}),
        beat(2, 300, 5),
    )
    status = await eventually(lambda: _progressed(client), 30, what="the third summary")
    assert (status.state, status.heartbeats, status.error) == ("running", 5, None)
    assert [(a.number, a.worker, a.outcome) for a in status.attempts] == [(1, "w:2", None)]
    shown = await warren(broker, "show", RUN)
    assert shown.returncode == 0, shown.stderr
    assert f"{RUN}  running" in shown.stdout and '"done":300' in shown.stdout
    assert "(5 heartbeats, last" in shown.stdout
    code, body = await api.call("GET", "/runs/" + quote(RUN, safe=""), role="viewer")
    assert (code, body["state"], body["progress"]) == (200, "running", {**HOSTILE, "done": 300})
    await _pages_show_it(api)
    await written(broker, ("attempt", {"attempt": 1, "outcome": "succeeded", "reason": "ok"}))
    await eventually(lambda: _off_the_overview(api), 30, what="the end to reach the overview")
    assert (await client.run(RUN).status()).state == "succeeded"


async def _progressed(client: Client) -> Any:
    status = await client.run(RUN).status()
    return status if status.progress and status.progress["done"] == 300 else None


async def _pages_show_it(api: Api) -> None:
    """The run page and the overview show the progress as text, never as markup."""

    async def on_overview() -> tuple[str, str] | None:
        html, text = await page_text(api, "")
        return (html, text) if RUN in text else None

    shown = await eventually(on_overview, 30, what="the long run on the overview")
    assert shown is not None
    html, text = shown
    assert "Long runs running" in text and '"done": 300' in text and "w:2" in text
    run_html, run_text = await page_text(api, "runs/" + quote(RUN, safe=""))
    assert "progress" in run_text and "5 heartbeats" in run_text and "running" in run_text
    for page in (html, run_html):
        assert "<script>alert(1)" not in page
        assert "\\u003cscript\\u003ealert(1)" in page


async def _off_the_overview(api: Api) -> bool:
    _, text = await page_text(api, "")
    return RUN not in text
