"""The http task end to end: a real worker calling a real local endpoint."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.conftest import plan
from tests.failed_records import run_warren
from tests.helpers import envelope, publish, wait_history
from tests.namespace import TestBroker
from tests.test_history import of_type
from tests.webhook import Endpoint, bodies, serve
from warren_cron.faultkit.waits import eventually

pytestmark = pytest.mark.broker


async def test_a_404_goes_to_the_failed_queue_after_one_attempt(
    broker: TestBroker, run_worker: Any
) -> None:
    """A 4xx is terminal: one request, then a record with the status and body excerpt."""
    with serve(Endpoint(statuses=[404])) as endpoint:
        await run_worker()
        await publish(broker, envelope("http", {"url": f"{endpoint.url}/hook"}), plan(50, 50))
        await broker.wait_depth(broker.names.failed_queue, 1)
    [record] = await broker.get_all(broker.names.failed_queue)
    assert len(endpoint.requests) == 1
    assert record.headers["cron-reason"] == "permanent-error"
    assert (
        "HTTP 404" in record.headers["cron-error"] and "not here!" in record.headers["cron-error"]
    )


async def test_a_503_is_retried_and_the_attempt_header_counts_up(
    broker: TestBroker, run_worker: Any
) -> None:
    """5xx answers are retried; the endpoint sees X-Cron-Attempt 1, 2, 3 and the same run id."""
    with serve(Endpoint(statuses=[503, 503, 200])) as endpoint:
        await run_worker()
        env = envelope("http", {"url": f"{endpoint.url}/hook", "json": {"a": 1}})
        await publish(broker, env, plan(50, 50, 50))
        await eventually(lambda: len(endpoint.requests) >= 3)
    attempts = [headers["X-Cron-Attempt"] for _, headers, _ in endpoint.requests]
    assert attempts == ["1", "2", "3"]
    assert {headers["X-Cron-Run-Id"] for _, headers, _ in endpoint.requests} == {env.run_id}
    assert await broker.depth(broker.names.failed_queue) == 0


async def test_a_deny_list_that_drops_the_metadata_entries_is_warned_about_at_start(
    run_worker: Any,
) -> None:
    """CRON_HTTP_DENY replaces its defaults: a worker whose list lets http tasks reach cloud
    metadata says so when it starts, before any http task has run."""
    with capture_logs() as logs:
        await run_worker(http_deny="10.0.0.0/8")
    events = [e["event"] for e in logs]
    warning = next(e for e in events if "cloud metadata" in e)
    assert events.index(warning) < events.index("worker started")


SECRET = "Bearer s3cr3t-literal"


async def test_a_denied_destination_fails_once_and_its_reason_shows_everywhere(
    broker: TestBroker, run_worker: Any, run_monitor: Any
) -> None:
    """Nothing sent; failure record, history and alert say ``destination-denied``; ``warren failed
    show`` and the alert never show the literal Authorization, the stored record keeps it."""
    with (
        serve(Endpoint(), host="127.0.0.2") as denied,
        serve(Endpoint()) as alerts,
    ):
        await run_monitor(alert_webhook_url=alerts.url)
        await run_worker(http_deny="127.0.0.2/32")
        payload = {"url": denied.url, "headers": {"Authorization": SECRET, "X-Ref": {"env": "A"}}}
        env = envelope("http", payload)
        await publish(broker, env, plan(50, 50))
        events = await wait_history(broker, lambda e: bool(of_type(e, "failed")), "a failure")
        await eventually(lambda: len(alerts.requests) >= 1)
    assert denied.requests == []
    [record] = await broker.get_all(broker.names.failed_queue)
    assert record.headers["cron-reason"] == "destination-denied"
    assert SECRET.encode() in record.body, "kept for a replay"
    assert [e.get("reason") for e in of_type(events, "attempt")] == ["destination-denied"]
    [alert] = bodies(alerts)
    assert alert["reason"] == "destination-denied" and "s3cr3t" not in str(alerts.requests)
    await broker.wait_depth(broker.names.failed_queue, 1)
    for args in ((), ("--json",)):
        shown = run_warren(broker, "failed", "show", env.run_id, *args)
        assert shown.returncode == 0, shown.stderr
        assert "s3cr3t" not in shown.stdout and "***" in shown.stdout
        assert '"env": "A"' in shown.stdout or '\\"env\\":\\"A\\"' in shown.stdout
