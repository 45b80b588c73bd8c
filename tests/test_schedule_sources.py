"""A runtime schedule and a file schedule appear alike, with their source, in ``warren
status``, ``warren schedules list|get``, the dashboard's overview and schedule page, and the
HTTP API; with or without a schedules file."""

from __future__ import annotations

import asyncio
import re
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.api import SPEC, Api, bearer
from tests.failed_records import json_out, run_warren
from tests.namespace import TestBroker
from tests.pausing import schedules_script
from tests.scheduling import every, write_schedules
from warren_cron.faultkit.private_broker import free_port

pytestmark = pytest.mark.broker

#: What would run as script if a page put it into the HTML as it is.
SCRIPT = "<script>document.title='pwned'</script>"


async def status(broker: TestBroker, path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``warren status`` on the schedules file ``path`` (which may not exist)."""
    return await asyncio.to_thread(
        run_warren, broker, "status", *args, CRON_SCHEDULES_FILE=str(path)
    )


def cells(table: str) -> list[list[str]]:
    """A printed table's lines split into cells, after the scheduler line."""
    return [re.split(r"\s{2,}", line) for line in table.splitlines()[1:]]


async def test_without_a_file_a_runtime_schedule_shows_in_status_and_list(
    broker: TestBroker, tmp_path: Path
) -> None:
    """No schedules file at all: the command creates a runtime schedule, and ``warren
    status`` (JSON and table) and ``schedules list`` show it with source runtime."""
    absent = tmp_path / "absent.toml"
    made = await schedules_script(broker, absent, "create", stdin=orjson.dumps(SPEC).decode())
    assert made.returncode == 0, made.stderr
    rows = json_out(await status(broker, absent, "--json"))
    assert [(r["name"], r["source"], r["status"], r["schedule"]) for r in rows] == [
        ("rt", "runtime", "active", "every 1h")
    ]
    assert rows[0]["next_fire_at"] is not None
    table = cells((await status(broker, absent)).stdout)
    assert (table[0][:3], table[0][-1]) == (["NAME", "SCHEDULE", "STATUS"], "SOURCE")
    assert (table[1][:3], table[1][-1]) == (["rt", "every 1h", "active"], "runtime")
    listed = json_out(await schedules_script(broker, absent, "list", "--json"))
    assert [(r["name"], r["source"]) for r in listed] == [("rt", "runtime")]


async def test_file_and_runtime_schedules_show_alike_in_status_and_get(
    broker: TestBroker, tmp_path: Path
) -> None:
    """With a file: status lists the file's schedule, then the runtime one, each with its
    source and pause; ``schedules get`` answers for the file's one too, with source file."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("from-file", "1h"))
    made = await schedules_script(broker, path, "create", stdin=orjson.dumps(SPEC).decode())
    assert made.returncode == 0, made.stderr
    paused = await schedules_script(broker, path, "pause", "rt", "--reason", "trial")
    assert paused.returncode == 0, paused.stderr
    rows = json_out(await status(broker, path, "--json"))
    assert [(r["name"], r["source"], r["status"], r["paused"]) for r in rows] == [
        ("from-file", "file", "active", False),
        ("rt", "runtime", "paused", True),
    ]
    assert rows[1]["next_fire_at"] is None
    got = json_out(await schedules_script(broker, path, "get", "from-file", "--json"))
    assert (got["source"], got["status"], got["spec"]["every"]) == ("file", "active", "1h")
    text = (await schedules_script(broker, path, "get", "from-file")).stdout
    assert text.startswith(f"from-file  (file {path}, active)") and '  every = "1h"' in text


async def page(api: Api, path: str) -> tuple[int, str]:
    """GET a dashboard page as the viewer (a bearer token, as a browser's login would)."""
    assert api.monitor.dashboard is not None and api.monitor.dashboard.url is not None
    url = api.monitor.dashboard.url + path.lstrip("/")
    async with api.http.get(url, headers=bearer("viewer")) as got:
        return got.status, await got.text()


def card(html: str, what: str) -> int:
    """The figure of the overview's card ``what`` (``schedules``, ``paused``)."""
    found = re.search(rf'<span class="big">(\d+)</span> {what}</a>', html)
    assert found is not None, html
    return int(found.group(1))


async def test_the_overview_page_and_api_show_a_runtime_schedule_as_the_files(api: Api) -> None:
    """The overview counts the runtime schedule (and its pause) with the file's;
    ``/schedules/<name>`` renders either, its payload as text; the API lists both."""
    spec: dict[str, Any] = {**SPEC, "payload": {"note": SCRIPT}}
    assert (await api.call("POST", "/schedules", json={"spec": spec}))[0] == 201
    status, html = await page(api, "/")
    assert status == 200 and (card(html, "schedules"), card(html, "paused")) == (2, 0)
    done = await api.call("POST", "/schedules/rt/pause", "operator", json={"reason": "trial"})
    assert done[0] == 200, done
    status, html = await page(api, "/")
    assert (card(html, "schedules"), card(html, "paused")) == (2, 1)
    status, html = await page(api, "/schedules/rt")
    assert status == 200 and '<dd class="source">runtime, version 1</dd>' in html, html
    assert "paused" in html and "trial" in html
    assert "&lt;script&gt;document.title=" in html and SCRIPT not in html
    status, html = await page(api, "/schedules/from-file")
    assert status == 200 and '<dd class="source">file (CRON_SCHEDULES_FILE)</dd>' in html
    assert (await page(api, "/schedules/no-such"))[0] == 404
    status, html = await page(api, "/schedules/new")
    assert status == 200 and 'name="name"' in html  # the form, not a schedule called new
    _, listed = await api.call("GET", "/schedules", "viewer")
    rows = [(r["name"], r["source"], r["paused"]) for r in listed["schedules"]]
    assert rows == [("from-file", "file", False), ("rt", "runtime", True)]


async def test_a_monitor_without_tokens_shows_runtime_schedules_on_its_pages(
    broker: TestBroker, run_monitor: Any, tmp_path: Path
) -> None:
    """No API token set (an open, read-only dashboard): a runtime schedule the command
    created is counted by the overview and has its page, as ``warren status`` shows it."""
    absent = tmp_path / "absent.toml"
    made = await schedules_script(broker, absent, "create", stdin=orjson.dumps(SPEC).decode())
    assert made.returncode == 0, made.stderr
    monitor = await run_monitor(schedules=[], schedules_file=absent, dashboard_port=free_port())
    assert monitor.dashboard is not None and monitor.dashboard.url is not None
    async with aiohttp.ClientSession() as http:
        async with http.get(monitor.dashboard.url) as got:
            assert got.status == 200 and card(await got.text(), "schedules") == 1
        async with http.get(monitor.dashboard.url + "schedules/rt") as got:
            assert got.status == 200 and "runtime, version 1" in await got.text()
