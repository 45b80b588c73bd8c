"""Known tasks: a real worker announces its tasks, and the API refuses a run of one no live
worker registered, naming the known ones; its OpenAPI document shows their schemas."""

from __future__ import annotations

from typing import Any

import pytest
from openapi_spec_validator import validate

from tests.api import Api
from tests.namespace import TestBroker
from tests.test_task_handles import kit_registry
from warren_cron.faultkit.waits import eventually
from warren_cron.known_tasks import LIVE_SECONDS, KnownTasks, announcement
from warren_cron.worker.consumer import Worker


async def announced(api: Api, run_worker: Any) -> Worker:
    """A worker running the typed test handlers, its tasks announced, heard by the monitor."""
    worker: Worker = await run_worker(kit_registry())
    ear = api.monitor.dashboard.api.known_tasks  # type: ignore[union-attr]
    await eventually(lambda: "kit-report" in ear.known.live(), 10, what="tasks heard")
    return worker


@pytest.mark.broker
async def test_a_run_of_a_task_no_live_worker_registered_is_refused(
    broker: TestBroker, api: Api, run_worker: Any
) -> None:
    """422 naming the known tasks for a typo; 202 for a registered task, and for the typo
    with ``force``; once the worker left, 422 saying no worker runs."""
    worker = await announced(api, run_worker)
    status, error = await api.call("POST", "/runs", "operator", json={"task": "kit-reprot"})
    assert status == 422 and error["error"]["code"] == "unknown_task", error
    assert "kit-reprot" in error["error"]["message"]
    assert "kit-greet, kit-report" in error["error"]["message"]
    body = {"task": "kit-report", "payload": {"customer": 1}}
    status, _ = await api.call("POST", "/runs", "operator", json=body)
    assert status == 202
    forced = {"task": "kit-reprot", "force": True}
    status, _ = await api.call("POST", "/runs", "operator", json=forced)
    assert status == 202
    worker.stop()
    await worker.stopped.wait()
    ear = api.monitor.dashboard.api.known_tasks  # type: ignore[union-attr]
    await eventually(lambda: not ear.known.live(), 10, what="the worker leaving")
    status, error = await api.call("POST", "/runs", "operator", json=body)
    assert status == 422 and "no worker is running" in error["error"]["message"]


@pytest.mark.broker
async def test_the_openapi_document_shows_the_known_tasks_payload_schemas(
    broker: TestBroker, api: Api, run_worker: Any
) -> None:
    """The document lists the live tasks on POST /runs and each typed payload's schema, and
    stays a valid OpenAPI 3.1 document."""
    await announced(api, run_worker)
    status, doc = await api.call("GET", "/openapi.json", role=None)
    assert status == 200
    known = doc["paths"]["/api/v1/runs"]["post"]["x-known-tasks"]
    # The worker's own tasks: the built-in ones and every @task of the modules imported.
    assert {"kit-greet", "kit-report", "http", "noop"} <= set(known), known
    report = doc["components"]["schemas"]["TaskPayload.kit-report"]
    assert report["required"] == ["customer"]
    assert report["properties"]["customer"]["type"] == "integer"
    validate(doc)


def test_tasks_are_not_judged_before_any_worker_announced() -> None:
    """Workers of an older release announce nothing: nothing is refused then."""
    known = KnownTasks()
    assert known.unknown("anything") is None
    known.heard(b"not json")
    known.heard(b'{"worker": 1, "tasks": {}}')
    assert known.unknown("anything") is None


def test_a_worker_not_heard_for_a_while_is_gone() -> None:
    """Past ``LIVE_SECONDS`` without an announcement, a worker's tasks are no longer known;
    a name no worker could register is left out of what is heard."""
    known = KnownTasks()
    known.heard(announcement("w1", {"report": None, " bad ": None}), now=100.0)
    assert known.unknown("report", now=100.0 + LIVE_SECONDS) is None
    assert known.live(now=100.0) == {"report": None}
    assert known.unknown("report", now=101.0 + LIVE_SECONDS) == []
