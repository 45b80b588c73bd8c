"""The monitor against a real broker and a real local webhook."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

import orjson
import pytest
from structlog.testing import capture_logs

from tests.conftest import plan
from tests.failed_records import ROOT, put_failed
from tests.helpers import envelope, publish
from tests.namespace import TestBroker
from tests.webhook import Endpoint, bodies, conditions, serve
from warren_cron.faultkit.waits import eventually
from warren_cron.headers import H_ATTEMPTS, H_FAILED_AT, H_REASON, H_SCHEDULE
from warren_cron.monitor.alerts import Condition, Digest
from warren_cron.records import record_from

pytestmark = pytest.mark.broker


async def test_a_failed_task_is_logged_once_and_alerted_with_its_fields(
    broker: TestBroker, run_monitor: Any
) -> None:
    """One ERROR line and one alert with run id, schedule, task, attempts, reason and time."""
    with serve(Endpoint()) as endpoint, capture_logs() as logs:
        await run_monitor(alert_webhook_url=endpoint.url)
        [env] = await put_failed(broker, 1, schedule="nightly", task="report")
        await eventually(lambda: len(endpoint.requests) >= 1)
    [alert] = bodies(endpoint)
    fields = ("run_id", "schedule", "task", "attempts", "reason")
    assert [alert[f] for f in fields] == [env.run_id, "nightly", "report", 4, "retries-exhausted"]
    assert alert["failed_at"] and env.run_id in alert["text"] and alert["count"] == 1
    [line] = [e for e in logs if e["event"] == "task failed"]
    assert line["log_level"] == "error" and line["run_id"] == env.run_id
    assert (line["schedule"], line["attempts"], line["failed_at"]) == (
        "nightly",
        4,
        alert["failed_at"],
    )
    assert await broker.depth(broker.names.monitor_queue) == 0
    assert await broker.depth(broker.names.failed_queue) == 1


async def test_a_burst_of_500_failures_sends_a_handful_of_alerts_with_counts(
    broker: TestBroker, run_monitor: Any
) -> None:
    """Grouping and the minimum interval turn 500 failures into at most 3 alerts."""
    # Published before the monitor starts: all 500 at once, however long publishing takes
    # on a loaded machine (it took longer than three intervals there).
    await put_failed(broker, 500, schedule="hourly")
    with serve(Endpoint()) as endpoint:
        await run_monitor(
            alert_webhook_url=endpoint.url,
            alert_group_wait_seconds=0.3,
            alert_min_interval_seconds=3,
        )
        await eventually(lambda: sum(b["count"] for b in bodies(endpoint)) >= 500, 20)
    alerts = bodies(endpoint)
    assert len(alerts) <= 3
    assert sum(a["count"] for a in alerts) == 500
    assert alerts[-1]["by_schedule"] == {"hourly": alerts[-1]["count"]}
    assert await broker.depth(broker.names.failed_queue) == 500


async def test_monitoring_goes_on_while_the_webhook_answers_500(
    broker: TestBroker, run_monitor: Any
) -> None:
    """Failures are logged and acked during the outage; the alert arrives when it ends."""
    outage = 6  # retried after 0.05, 0.1, 0.2 ... 1.6 s: about 3 s of 500s
    with serve(Endpoint(statuses=[500] * outage + [200])) as endpoint, capture_logs() as logs:
        await run_monitor(alert_webhook_url=endpoint.url)
        await put_failed(broker, 20)
        await eventually(lambda: len([e for e in logs if e["event"] == "task failed"]) == 20)
        assert await broker.depth(broker.names.monitor_queue) == 0
        assert len(endpoint.requests) < outage  # all of it while the webhook still fails
        await eventually(lambda: len(endpoint.requests) > outage, 15)
    assert sum(a["count"] for a in bodies(endpoint, delivered_from=outage)) == 20
    assert any(e["event"].startswith("alert refused") for e in logs)
    assert await broker.depth(broker.names.failed_queue) == 20


async def test_a_deep_failed_queue_alerts_and_clears_with_a_recovery_message(
    broker: TestBroker, run_monitor: Any
) -> None:
    """Past the threshold an ALERT is sent; once the queue is emptied, a RESOLVED one."""
    with serve(Endpoint()) as endpoint:
        await run_monitor(
            alert_webhook_url=endpoint.url, failed_alert_threshold=2, monitor_interval_seconds=0.1
        )
        await put_failed(broker, 3)
        await eventually(lambda: conditions(endpoint, "failed-queue") == ["firing"])
        await broker.get_all(broker.names.failed_queue, ack=True)
        await eventually(lambda: conditions(endpoint, "failed-queue") == ["firing", "resolved"])
    assert "RESOLVED" in bodies(endpoint)[-1]["text"]


async def test_a_retry_queue_whose_head_outstays_its_ttl_is_reported_stalled(
    broker: TestBroker, run_monitor: Any
) -> None:
    """The same head past TTL plus margin is a stall; the broker cannot stall on demand,
    so the monitor's clock is moved an hour ahead instead."""
    await publish(broker, envelope("job"), plan(60_000))
    await broker.reject_head()  # now waiting 60 s in the retry queue
    retry = broker.names.retry_queue("1m")
    await broker.wait_depth(retry, 1)
    offset = [0.0]
    with serve(Endpoint()) as endpoint:
        monitor = await run_monitor(
            clock=lambda: time.monotonic() + offset[0],
            alert_webhook_url=endpoint.url,
            monitor_interval_seconds=0.1,
            max_retries=1,
            retry_delay_ms=60_000,
        )
        # A few checks see the head at its real age.
        await eventually(lambda: monitor.checks >= 3)
        assert conditions(endpoint, f"stalled:{retry}") == []
        offset[0] = 3600.0
        await eventually(lambda: conditions(endpoint, f"stalled:{retry}") == ["firing"])
        await broker.get_all(retry, ack=True)
        await eventually(lambda: conditions(endpoint, f"stalled:{retry}") == ["firing", "resolved"])


@pytest.mark.parametrize(
    ("part", "call"), [("watch", "check"), ("schedulers", "check"), ("keeper", "save")]
)
async def test_a_loops_call_cut_by_a_stuck_connection_does_not_end_the_loop(
    run_monitor: Any, monkeypatch: pytest.MonkeyPatch, part: str, call: str
) -> None:
    """The queue checks, the scheduler checks and the status fold's saves go on after a call
    failed with the CancelledError aiormq gives the calls under way on a connection it
    dropped as stuck (no frame within the heartbeat timeout), which is no cancel of the loop."""
    monitor = await run_monitor(monitor_interval_seconds=0.05)
    owner = getattr(monitor, part)
    original, calls = getattr(owner, call), [0]

    async def cut_once(*args: Any) -> Any:
        calls[0] += 1
        if calls[0] == 1:
            raise asyncio.CancelledError  # what aiormq raised; the loop's task is not cancelled
        return await original(*args)

    monkeypatch.setattr(owner, call, cut_once)
    with capture_logs() as logs:
        await eventually(lambda: calls[0] >= 3, 10, what="the loop calling again")
    assert any("trying again" in e["event"] for e in logs if e["log_level"] == "warning")


def test_a_firing_condition_and_its_recovery_both_unsent_cancel_out() -> None:
    """A flap shorter than the alert interval sends nothing at all."""
    digest = Digest()
    digest.add_condition(Condition("failed-queue", True, "deep"), now=1.0)
    digest.add_condition(Condition("failed-queue", False, "back"), now=2.0)
    assert digest.empty


def test_a_grouped_alert_counts_by_reason_and_schedule() -> None:
    """The text line of a burst gives totals per reason and per schedule, and one example."""
    digest = Digest()
    for n in range(12):
        reason = "unknown-task" if n % 3 == 0 else "retries-exhausted"
        headers = {H_REASON: reason, H_ATTEMPTS: 4, H_FAILED_AT: "2026-01-01T00:00:00+00:00"}
        headers[H_SCHEDULE] = "nightly"
        body = orjson.dumps({"task": "job"})
        record = record_from(body, headers, "final", "cron_scheduler", {"message_id": f"r{n}"})
        digest.add_failure(record, now=float(n))
    text = digest.text("cron")
    assert "12 tasks failed (retries-exhausted 8, unknown-task 4)" in text
    assert "schedules: nightly 12" in text and "run r0" in text
    assert len(digest.body("cron")["failures"]) == 10


def test_monitor_check_names_a_bad_webhook_url() -> None:
    """``--check`` exits 2 naming the variable, and 0 on good settings."""

    def check(**extra: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRON_")}
        return subprocess.run(
            [sys.executable, "-m", "warren_cron.monitor", "--check"],
            cwd=ROOT,
            env={**env, **extra},
            capture_output=True,
            text=True,
            timeout=60,
        )

    bad = check(CRON_ALERT_WEBHOOK_URL="not a url")
    assert bad.returncode == 2 and "CRON_ALERT_WEBHOOK_URL" in bad.stderr
    assert check(CRON_ALERT_WEBHOOK_URL="https://chat.example/hook").returncode == 0
