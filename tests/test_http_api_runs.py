"""The HTTP API's runs and failed tasks on a real monitor and broker: roles, enqueue, a run's
state, replay and purge by filter with dry runs, every write audited; hostile input refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api import Api
from tests.failed_records import put_failed
from tests.helpers import registry, wait_history
from tests.namespace import TestBroker
from warren_cron.faultkit.waits import eventually
from warren_cron.worker.context import TaskContext

pytestmark = pytest.mark.broker


async def answer(payload: Any, ctx: TaskContext) -> dict[str, Any]:
    """A handler returning what it was given, doubled."""
    return {"twice": payload * 2}


async def test_an_operator_enqueues_and_a_viewer_reads_the_run_and_its_result(
    api: Api, run_worker: Any, broker: TestBroker
) -> None:
    """POST /runs as operator (202, audited as triggered by the token's name); the viewer's
    GET /runs/{id} shows it succeeded with the handler's value, and GET /runs lists it."""
    await run_worker(registry(job=answer))
    status, done = await api.call("POST", "/runs", "operator", json={"task": "job", "payload": 4})
    assert status == 202 and done["created"] is True

    async def succeeded() -> Any:
        code, run = await api.call("GET", f"/runs/{done['run_id']}", "viewer")
        return run if code == 200 and run["state"] == "succeeded" else None

    run = await eventually(succeeded, 20, what="the run succeeded")
    assert run["result"] == {"twice": 8} and run["attempts"][0]["outcome"] == "succeeded"
    events = await wait_history(broker, lambda e: any(x.type == "triggered" for x in e), "audit")
    [audit] = [e for e in events if e.type == "triggered"]
    assert (audit.run_id, audit.get("by")) == (done["run_id"], "oncall")
    status, page = await api.call("GET", "/runs?state=succeeded&since=1h", "viewer")
    assert status == 200 and done["run_id"] in [r["run_id"] for r in page["runs"]]


async def _is(found: Any, expected: tuple[int, Any]) -> bool:
    """Whether the awaited ``found`` is ``expected``."""
    return bool(await found == expected)


async def test_a_viewer_cannot_enqueue_and_a_delayed_task_shows_delayed(api: Api) -> None:
    """403 for a viewer's POST /runs; an operator's task an hour ahead lists as delayed."""
    status, error = await api.call("POST", "/runs", "viewer", json={"task": "job"})
    assert status == 403 and "needs operator" in error["error"]["message"]
    body = {"task": "job", "delay": 3600, "key": "api-delayed"}
    status, done = await api.call("POST", "/runs", "operator", json=body)
    assert status == 202

    async def state() -> tuple[int, Any]:
        status, run = await api.call("GET", f"/runs/{done['run_id']}", "viewer")
        return status, run.get("state")

    # The enqueue's history event is published in the background: the run is known once it lands.
    await eventually(lambda: _is(state(), (200, "delayed")), 15, what="the run listed as delayed")
    status, again = await api.call("POST", "/runs", "operator", json=body)
    assert (again["run_id"], again["created"]) == (done["run_id"], False)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/runs?since=99999999999999d", "since"),
        ("/runs?since=yesterday", "since"),
        ("/runs?state=exploded", "state"),
        ("/runs?limit=100000", "limit"),
        ("/runs?colour=red", "colour"),
        ("/failed?since=soon", "since"),
        ("/runs/" + "x" * 400, "run_id"),
    ],
)
async def test_malformed_filters_are_refused_with_400_naming_the_field(
    api: Api, path: str, why: str
) -> None:
    """A huge or unreadable since, an unknown state, a page too large, an unknown field, a
    run id no run has: 400 naming what is wrong."""
    status, error = await api.call("GET", path, "viewer")
    assert status == 400 and why in error["error"]["message"], error


async def test_an_unknown_run_is_404_and_a_bad_enqueue_is_400(api: Api) -> None:
    """No event of the run: 404; a negative delay or a time without zone: 400."""
    status, error = await api.call("GET", "/runs/nightly@2020-01-01T00:00:00Z", "viewer")
    assert status == 404 and "no event of run" in error["error"]["message"]
    status, error = await api.call("POST", "/runs", "operator", json={"task": "job", "delay": -1})
    assert status == 400 and "delay" in error["error"]["message"]
    naive = {"task": "job", "at": "2030-01-01T00:00:00"}
    status, error = await api.call("POST", "/runs", "operator", json=naive)
    assert status == 400, error


async def test_replay_by_filter_dry_runs_then_moves_and_purge_needs_an_admin(
    api: Api, broker: TestBroker
) -> None:
    """Dry run: counted, nothing moved; then replayed for real, audited with the token's
    name; purge is refused to an operator, dry-runs and purges for an admin."""
    await put_failed(broker, 2, schedule="billing")
    await put_failed(broker, 1, schedule="other")
    index = api.monitor.dashboard.failed  # type: ignore[union-attr]
    await eventually(lambda: len(index.records) == 3, 20, what="3 records indexed")
    body = {"filter": {"schedule": "billing"}, "dry_run": True}
    status, moved = await api.call("POST", "/failed/replay", "operator", json=body)
    assert (status, moved["moved"], moved["dry_run"]) == (200, 2, True)
    status, page = await api.call("GET", "/failed?schedule=billing", "viewer")
    assert (status, page["matched"]) == (200, 2)
    replay = {"filter": {"schedule": "billing"}, "reason": "fixed the card processor"}
    status, moved = await api.call("POST", "/failed/replay", "operator", json=replay)
    assert (status, moved["moved"], moved["failed"]) == (200, 2, 0), moved
    events = await wait_history(broker, lambda e: sum(x.type == "replayed" for x in e) == 2, "2")
    assert {e.get("by") for e in events if e.type == "replayed"} == {"oncall"}
    purge = {"filter": {"schedule": "other"}}
    status, _ = await api.call("POST", "/failed/purge", "operator", json=purge)
    assert status == 403
    status, moved = await api.call("POST", "/failed/purge", json={**purge, "dry_run": True})
    assert (status, moved["moved"]) == (200, 1)
    status, moved = await api.call("POST", "/failed/purge", json=purge)
    assert (status, moved["moved"]) == (200, 1)
    status, page = await api.call("GET", "/failed", "viewer")
    assert page["matched"] == 0


async def test_replay_or_purge_without_a_filter_needs_all(api: Api) -> None:
    """An empty filter is refused (400) unless ``all`` is true, as ``warren failed --all``."""
    status, error = await api.call("POST", "/failed/purge", json={"dry_run": True})
    assert status == 400 and "all: true" in error["error"]["message"]
    status, moved = await api.call("POST", "/failed/purge", json={"dry_run": True, "all": True})
    assert (status, moved["moved"]) == (200, 0)
