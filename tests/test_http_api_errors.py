"""The HTTP API answers every error in its JSON shape, saying what to fix: numbers past any
time, versions past any count, payloads nested past what can be stored, and a handler that
fails in a way nobody foresaw; the monitor keeps serving."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.api import SPEC, Api
from tests.namespace import TestBroker

pytestmark = pytest.mark.broker

HUGE = "123456789012345678901234567890"


def nested(depth: int) -> Any:
    """A JSON list nested ``depth`` deep: ``[[[...]]]``."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


async def _raw(api: Api, method: str, path: str, body: str) -> tuple[int, Any]:
    """Send ``body`` as it is (Python's JSON cannot write a 30-digit float) as the admin."""
    headers = {"Content-Type": "application/json"}
    return await api.call(method, path, data=body.encode(), headers=headers)


@pytest.mark.parametrize("delay", ["1e308", HUGE])
async def test_a_delay_past_any_time_is_a_400_naming_the_longest(api: Api, delay: str) -> None:
    """``"delay": 1e308`` or a 30-digit number: 400 saying the longest delay, not a 500."""
    status, error = await _raw(api, "POST", "/runs", f'{{"task": "noop", "delay": {delay}}}')
    assert status == 400, error
    assert "delay" in error["error"]["message"] and "8.5 years" in error["error"]["message"]


async def test_a_version_past_any_count_is_a_400(api: Api) -> None:
    """``DELETE /schedules/null?version=<30 digits>``: 400 on ``version``, not a 500."""
    status, error = await api.call("DELETE", f"/schedules/null?version={HUGE}")
    assert status == 400 and "version" in error["error"]["message"], error
    status, error = await api.call("PUT", "/schedules/null", json={"version": int(HUGE)})
    assert status == 400 and "version" in error["error"]["message"], error


async def test_a_payload_nested_too_deep_is_refused_naming_the_limit(
    api: Api, broker: TestBroker
) -> None:
    """A payload nested 253 deep, to a run or a schedule: 400 naming the depth allowed; one
    nested 30 deep goes through."""
    status, error = await api.call("POST", "/runs", json={"task": "noop", "payload": nested(253)})
    assert status == 400 and "nested" in error["error"]["message"], error
    spec = {**SPEC, "payload": nested(253)}
    status, error = await api.call("POST", "/schedules", json={"spec": spec})
    assert status == 400 and "nested" in error["error"]["message"], error
    status, error = await api.call("POST", "/schedules", json={"spec": spec, "x": nested(300)})
    assert status == 400 and error["error"]["code"] in ("invalid", "malformed_json"), error
    status, done = await api.call("POST", "/runs", json={"task": "noop", "payload": nested(30)})
    assert status == 202, done
    status, made = await api.call(
        "POST", "/schedules", json={"spec": {**SPEC, "payload": nested(30)}}
    )
    assert status == 201, made


async def test_a_handler_failing_unforeseen_answers_json_and_the_monitor_serves_on(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error no handler expected is a 500 in the JSON shape that names no secret; the
    next request is served."""
    dashboard = api.monitor.dashboard
    assert dashboard is not None

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("the secret is hunter2")

    monkeypatch.setattr(dashboard.api.client, "enqueue", broken)
    with capture_logs() as logs:
        status, error = await api.call("POST", "/runs", "operator", json={"task": "noop"})
    assert status == 500 and error["error"]["code"] == "internal", error
    assert "ZeroDivisionError" in error["error"]["message"]
    assert [line["error"] for line in logs if line["event"] == "api call failed"] == [
        "ZeroDivisionError"
    ]
    assert "hunter2" not in str(error) + str(logs)
    status, _ = await api.call("GET", "/schedules", "viewer")
    assert status == 200
    status, doc = await api.call("GET", "/openapi.json", role=None)
    assert "500" in doc["paths"]["/api/v1/runs"]["post"]["responses"]
