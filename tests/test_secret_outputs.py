"""End to end: an endpoint echoing the request's secrets in its 3xx, 4xx and 5xx answers, a real
worker and monitor on the real broker, and every place a failure is shown to someone."""

from __future__ import annotations

import asyncio
import html
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp
import orjson
import pytest
from structlog.testing import capture_logs

from tests.conftest import plan
from tests.dashboard import free_port
from tests.echo import CONTEXT, echoing, leaks
from tests.failed_records import run_warren
from tests.helpers import envelope, publish, wait_history
from tests.namespace import TestBroker
from tests.test_secret_echo import BASIC, ENV_SECRET, FILE_SECRET, SECRETS, secret_headers
from tests.webhook import Endpoint, serve
from warren_cron.envelope import Envelope
from warren_cron.faultkit.waits import eventually
from warren_cron.history.events import Event
from warren_cron.redaction import REDACTED

pytestmark = pytest.mark.broker
STATUSES = (302, 403, 500)
#: The secrets the task names by reference: never stored, not even in the payload.
RESOLVED = [ENV_SECRET, FILE_SECRET]


def failed_all(envelopes: list[Envelope]) -> Any:
    """A condition for ``wait_history``: every run of ``envelopes`` has failed."""
    runs = {env.run_id for env in envelopes}
    return lambda events: runs <= {e.run_id for e in events if e.type == "failed"}


def export_outputs(broker: TestBroker) -> dict[str, str]:
    """``warren failed export``: the records but for their stored payloads, and those payloads
    (which keep a literal Authorization for ``restore``, by design)."""
    lines = [
        orjson.loads(line)
        for line in json_lines(run_warren(broker, "failed", "export", "--out", "-"))
    ]
    return {
        "export": "\n".join(str({k: v for k, v in line.items() if k != "body"}) for line in lines),
        "export bodies": "\n".join(line["body"] for line in lines),
    }


def json_lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines a script printed, after checking it succeeded."""
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def script_outputs(broker: TestBroker, runs: list[str]) -> dict[str, str]:
    """What ``warren failed`` and ``warren history`` print about the runs, by command line."""
    commands: list[tuple[str, ...]] = [("history", "list", "--json")]
    for run in runs:
        commands += [("failed", "show", run), ("failed", "show", run, "--json")]
        commands += [("history", "show", run), ("history", "show", run, "--json")]
    outputs = {}
    for command in commands:
        result = run_warren(broker, *command)
        assert result.returncode == 0, (command, result.stderr)
        outputs[" ".join(command)] = result.stdout + result.stderr
    return outputs


async def pages(
    dashboard_url: str, runs: list[str], headers: dict[str, str] | None = None
) -> dict[str, str]:
    """The dashboard's run list, and each run's page and failure record, read logged out
    (or with ``headers``: a bearer token where tokens are set)."""
    paths = ["runs"]
    paths += [f"runs/{quote(run)}" for run in runs]
    paths += [f"failed/record?run_id={quote(run)}" for run in runs]
    found = {}
    async with aiohttp.ClientSession() as http:
        for path in paths:
            async with http.get(dashboard_url + path, headers=headers) as answer:
                assert answer.status == 200 and "/login" not in str(answer.url), path
                found[path] = html.unescape(await answer.text())
    return found


async def run_failures(
    broker: TestBroker, run_worker: Any, run_monitor: Any, tmp_path: Path
) -> tuple[list[Envelope], list[Event], str, list[str]]:
    """Fail one http task per status against the echo; the runs, their history, the
    dashboard's URL and the alerts sent."""
    async with echoing() as echo:
        with serve(Endpoint()) as alerts:
            monitor = await run_monitor(dashboard_port=free_port(), alert_webhook_url=alerts.url)
            await run_worker(http_secret_env="HOOK_*", http_secret_dir=tmp_path)
            headers = secret_headers(tmp_path)
            envelopes = [
                envelope("http", {"url": f"{echo.url}/status/{status}", "headers": headers})
                for status in STATUSES
            ]
            for env in envelopes:
                await publish(broker, env, plan(50))
            events = await wait_history(broker, failed_all(envelopes), "three failures")
            await broker.wait_depth(broker.names.failed_queue, len(STATUSES))
            await eventually(lambda: len(alerts.requests) >= len(STATUSES), 10, what="alerts")
            await eventually(lambda: len(monitor.dashboard.failed.records) == 3, 20)
        assert all(seen["X-Upstream"] == ENV_SECRET for seen in echo.seen), "secret was sent"
    return envelopes, events, monitor.dashboard.url, [str(r) for r in alerts.requests]


async def test_no_output_anywhere_shows_a_secret_the_endpoint_echoed(
    broker: TestBroker,
    run_worker: Any,
    run_monitor: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Worker and monitor logs, the failure records, history, alerts, ``warren failed`` and
    ``warren history`` in text and JSON, and the dashboard's pages: no secret in any form, while
    the excerpt still shows the rest of what the endpoint said."""
    monkeypatch.setenv("HOOK_TOKEN", ENV_SECRET)
    with capture_logs() as logs:
        envelopes, events, url, alerts = await run_failures(
            broker, run_worker, run_monitor, tmp_path
        )
    runs = [env.run_id for env in envelopes]
    records = await broker.get_all(broker.names.failed_queue)
    outputs = {
        "logs": "\n".join(map(str, logs)),
        "records": "\n".join(str(r.headers) for r in records),
        "history": "\n".join(str(e.data) for e in events),
        "alerts": "\n".join(alerts),
        # In threads: the commands take seconds each on a loaded machine, and blocking the
        # event loop that long cost the in-process monitor its broker heartbeats.
        **await asyncio.to_thread(export_outputs, broker),
        **await asyncio.to_thread(script_outputs, broker, runs),
        **await pages(url, runs),
    }
    stored = outputs.pop("export bodies") + "".join(r.body.decode() for r in records)
    assert leaks(stored, RESOLVED) == [] and BASIC in stored, "only references are stored"
    found = {name: leaks(text, SECRETS) for name, text in outputs.items()}
    assert {name: leaked for name, leaked in found.items() if leaked} == {}
    errors = [r.headers["cron-error"] for r in records]
    assert all(CONTEXT in e and REDACTED in e for e in errors), errors
    assert {f"HTTP {status}" for status in STATUSES} <= {e.split(" from")[0][-8:] for e in errors}
    monitor_lines = [e for e in logs if e["event"] == "task failed"]
    assert len(monitor_lines) == 3 and all(CONTEXT in e["error"] for e in monitor_lines)
    assert all(CONTEXT in outputs[f"failed show {run}"] for run in runs)
    assert all(CONTEXT in outputs[f"runs/{quote(run)}"] for run in runs)
    assert all(CONTEXT in outputs[f"failed/record?run_id={quote(run)}"] for run in runs)
    assert all(CONTEXT in outputs[f"history show {run}"] for run in runs)
