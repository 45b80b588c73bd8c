"""End to end: an http task whose URL carries a query token and a password fails, and no view
of the failed run (records, history, the commands, the dashboard, the API, the logs) shows
either; each shows the URL with ``***`` in their place."""

from __future__ import annotations

import asyncio
import base64
from typing import Any
from urllib.parse import quote

import pytest
from structlog.testing import capture_logs

from tests.api import Api, bearer
from tests.conftest import plan
from tests.echo import CONTEXT, echoing, leaks
from tests.helpers import envelope, publish, wait_history
from tests.namespace import TestBroker
from tests.test_secret_outputs import export_outputs, failed_all, pages, script_outputs
from warren_cron.envelope import Envelope
from warren_cron.faultkit.waits import eventually
from warren_cron.history.events import Event
from warren_cron.redaction import REDACTED

pytestmark = pytest.mark.broker
TOKEN = "SECRET123-query-token-0a1b2c"
PASSWORD = "hunter2-url-pass-3d4e5f"
SECRETS = [TOKEN, PASSWORD]


async def fail_once(broker: TestBroker, api: Api, run_worker: Any) -> tuple[Envelope, Event]:
    """One http task to a URL with both secrets, answered 500 until it fails for good; the
    task and its ``failed`` event, once the monitor holds the record."""
    async with echoing(lambda _request: CONTEXT) as echo:
        await run_worker()
        where = echo.url.removeprefix("http://")
        url = f"http://ops:{PASSWORD}@{where}/status/500?token={TOKEN}&team=blue"
        env = envelope("http", {"url": url, "json": {"n": 1}})
        await publish(broker, env, plan(50))
        events = await wait_history(broker, failed_all([env]), "the failure")
        await broker.wait_depth(broker.names.failed_queue, 1)
        records = api.monitor.dashboard.failed.records  # type: ignore[union-attr]
        await eventually(lambda: len(records) == 1, 20, what="the monitor's record")
    basic = base64.b64encode(f"ops:{PASSWORD}".encode()).decode()
    assert echo.seen[0]["Authorization"] == f"Basic {basic}", "the password was sent"
    return env, next(e for e in events if e.type == "failed")


async def api_outputs(api: Api, run: str) -> dict[str, str]:
    """The API's failed list and run, read by a viewer."""
    found = {}
    for path in (f"/failed?run_id={quote(run)}", f"/runs/{quote(run)}"):
        status, answer = await api.call("GET", path, role="viewer")
        assert status == 200, (path, answer)
        found[f"api {path}"] = str(answer)
    return found


async def test_a_url_token_and_password_are_masked_in_every_view(
    broker: TestBroker, api: Api, run_worker: Any
) -> None:
    """The record keeps the URL as sent (a replay works); ``warren failed show`` (text and
    JSON), the export's fields, ``warren history``, the dashboard's run and record pages, the
    API and the logs show ``token=***`` and ``ops:***@``, never the token or the password."""
    with capture_logs() as logs:
        env, failed = await fail_once(broker, api, run_worker)
    run = env.run_id
    records = await broker.get_all(broker.names.failed_queue)
    assert TOKEN in records[0].body.decode(), "the record keeps the URL for a replay"
    dashboard = api.monitor.dashboard.url  # type: ignore[union-attr]
    assert dashboard is not None
    outputs = {
        "logs": "\n".join(map(str, logs)),
        "record headers": str(records[0].headers),
        "history": str(failed.data),
        **await asyncio.to_thread(export_outputs, broker),
        **await asyncio.to_thread(script_outputs, broker, [run]),
        **await pages(dashboard, [run], bearer("viewer")),
        **await api_outputs(api, run),
    }
    outputs.pop("export bodies")  # a backup for restore: kept as sent, by design
    found = {name: leaks(text, SECRETS) for name, text in outputs.items()}
    assert {name: leaked for name, leaked in found.items() if leaked} == {}
    shown = f"token={REDACTED}&team=blue"
    views = (
        f"failed show {run}",
        f"failed show {run} --json",
        f"failed/record?run_id={quote(run)}",
    )
    for view in views:
        assert shown in outputs[view] and f"ops:{REDACTED}@" in outputs[view], view
