"""Enqueue, then wait, over the HTTP API alone: curl and a long poll on a real monitor and
broker; waits bounded in length and in number, unknown runs refused."""

from __future__ import annotations

import asyncio
import json
import shutil
from typing import Any
from urllib.parse import quote

import pytest

from tests.api import TOKENS, Api, bearer
from tests.helpers import registry
from warren_cron.errors import PermanentError
from warren_cron.faultkit.waits import eventually
from warren_cron.worker.context import TaskContext

pytestmark = pytest.mark.broker


async def doubled(payload: Any, ctx: TaskContext) -> dict[str, Any]:
    """The handler whose value the script waits for."""
    return {"doubled": payload * 2}


async def refused(payload: Any, ctx: TaskContext) -> None:
    """A handler failing for good at once."""
    raise PermanentError("customer 42 has no address")


async def curl(*args: str) -> Any:
    """Run the machine's curl (in a process: the monitor serves from this event loop) and
    read its answer as JSON."""
    assert shutil.which("curl"), "curl is needed: apt-get install curl"
    process = await asyncio.create_subprocess_exec(
        "curl", "-sS", "--fail-with-body", *args, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    assert process.returncode == 0, out
    return json.loads(out)


async def test_a_shell_script_enqueues_with_curl_and_waits_for_the_result(
    api: Api, run_worker: Any
) -> None:
    """POST /runs then GET /runs/{id}?wait=30, both with curl: the second answers with the
    handler's value once the run succeeded, in one call."""
    await run_worker(registry(job=doubled))
    auth = f"Authorization: Bearer {TOKENS['operator']}"
    done = await curl(
        "-X", "POST", "-H", auth, "-H", "Content-Type: application/json",
        "-d", '{"task": "job", "payload": 21}', f"{api.url}/runs",
    )  # fmt: skip
    run = await curl("-H", auth, f"{api.url}/runs/{quote(done['run_id'], safe='')}?wait=30")
    assert (run["state"], run["result"]) == ("succeeded", {"doubled": 42})


async def test_a_wait_on_a_run_that_fails_answers_failed_with_its_error(
    api: Api, run_worker: Any
) -> None:
    """The long poll ends with the run's failure, not at the end of the wait."""
    await run_worker(registry(job=refused))
    _, done = await api.call("POST", "/runs", "operator", json={"task": "job"})
    path = f"/runs/{quote(done['run_id'], safe='')}?wait=60"
    status, run = await asyncio.wait_for(api.call("GET", path, "viewer"), 30)
    assert (status, run["state"]) == (200, "failed")
    assert "customer 42 has no address" in run["error"]


async def test_a_wait_that_ends_first_answers_the_state_the_run_is_in(api: Api) -> None:
    """No worker: after the wait the run is still pending, and the answer says so."""
    _, done = await api.call("POST", "/runs", "operator", json={"task": "job"})
    path = f"/runs/{quote(done['run_id'], safe='')}?wait=1"
    status, run = await api.call("GET", path, "viewer")
    assert (status, run["state"]) == (200, "pending")


async def test_waits_are_bounded_in_length_and_in_number(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wait over a minute is refused with what to do; once the waiting calls reach the
    limit the next gets 429 with Retry-After at once; an unknown run is 404 after its wait."""
    status, error = await api.call("GET", "/runs/x?wait=3600", "viewer")
    assert status == 400 and "wait" in error["error"]["message"]
    assert api.monitor.dashboard is not None
    waiters = api.monitor.dashboard.api.waiters
    monkeypatch.setattr(waiters, "limit", 2)
    waiting = [
        asyncio.create_task(api.call("GET", f"/runs/never-{n}?wait=5", "viewer")) for n in (1, 2)
    ]
    await eventually(lambda: waiters.count == 2, 10, what="two calls waiting")
    async with api.http.get(f"{api.url}/runs/never-3?wait=5", headers=bearer("viewer")) as got:
        assert (got.status, got.headers["Retry-After"]) == (429, "1")
        assert (await got.json())["error"]["code"] == "throttled"
    assert [code for code, _ in await asyncio.gather(*waiting)] == [404, 404]
    assert waiters.count == 0
