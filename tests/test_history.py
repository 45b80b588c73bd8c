"""The worker's run history on a real broker: attempt and failure events, never in the way."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import pytest
import structlog.testing
from prometheus_client import REGISTRY

from tests.conftest import plan
from tests.helpers import Recorder, envelope, publish, registry, wait_history
from tests.namespace import TestBroker
from tests.webhook import Endpoint, serve
from warren_cron.errors import PermanentError
from warren_cron.faultkit.waits import eventually
from warren_cron.history.events import Event
from warren_cron.history.run_fold import fold_runs
from warren_cron.worker.consumer import Worker
from warren_cron.worker.context import TaskContext

pytestmark = pytest.mark.broker


def of_type(events: list[Event], kind: str) -> list[Event]:
    """The events of one type."""
    return [event for event in events if event.type == kind]


async def test_each_attempt_and_the_failure_are_in_the_history(
    broker: TestBroker, run_worker: Any
) -> None:
    """A task failing through two retries: three attempt events, then a failed event."""
    await run_worker(registry(job=Recorder(failures=100)))
    env = envelope("job", schedule="nightly")
    await publish(broker, env, plan(100, 200))
    events = await wait_history(broker, lambda e: bool(of_type(e, "failed")), "a failed event")
    attempts = of_type(events, "attempt")
    assert [(e.get("attempt"), e.get("outcome")) for e in attempts] == [
        (1, "retrying"),
        (2, "retrying"),
        (3, "failed"),
    ]
    first = attempts[0]
    assert (first.run_id, first.schedule, first.get("task")) == (env.run_id, "nightly", "job")
    assert first.get("error") == "RuntimeError: failure 1"
    assert (first.get("pid"), first.get("host")) == (os.getpid(), os.uname().nodename)
    assert first.get("duration_ms") >= 0
    [failed] = of_type(events, "failed")
    assert (failed.get("reason"), failed.get("attempts")) == ("retries-exhausted", 3)
    run = fold_runs(events)[env.run_id]
    assert (run.outcome, run.attempts) == ("failed", 3)


async def test_a_success_ends_the_run(broker: TestBroker, run_worker: Any) -> None:
    """One attempt event with outcome succeeded; the run's outcome follows it; the attempt's
    log line says the same time as its event."""
    with structlog.testing.capture_logs() as lines:
        await run_worker(registry(job=Recorder()))
        env = envelope("job")
        await publish(broker, env, plan(100))
        events = await wait_history(broker, lambda e: bool(of_type(e, "attempt")), "an attempt")
    [attempt] = of_type(events, "attempt")
    assert (attempt.get("outcome"), attempt.get("reason")) == ("succeeded", "succeeded")
    [line] = [line for line in lines if line["event"] == "attempt"]
    assert datetime.fromisoformat(line["timestamp"]) == attempt.at
    assert fold_runs(events)[env.run_id].outcome == "succeeded"
    assert not of_type(events, "failed")


async def test_http_attempts_carry_the_status_they_got(broker: TestBroker, run_worker: Any) -> None:
    """A 503 then a 404: each attempt event names its HTTP status."""
    with serve(Endpoint(statuses=[503, 404])) as endpoint:
        await run_worker()
        await publish(broker, envelope("http", {"url": endpoint.url}), plan(100, 100))
        events = await wait_history(broker, lambda e: bool(of_type(e, "failed")), "a failure")
    statuses = [(e.get("http_status"), e.get("outcome")) for e in of_type(events, "attempt")]
    assert statuses == [(503, "retrying"), (404, "failed")]


async def test_error_texts_in_history_hide_passwords_and_are_cut_short(
    broker: TestBroker, run_worker: Any
) -> None:
    """An error quoting a URL with a password, and a long one: history keeps neither whole."""

    async def leaky(payload: Any, ctx: TaskContext) -> None:
        raise PermanentError(f"cannot reach https://bob:s3cret@db.internal/ {'x' * 2000}")

    await run_worker(registry(leaky=leaky))
    await publish(broker, envelope("leaky"), plan(100))
    events = await wait_history(broker, lambda e: bool(of_type(e, "failed")), "a failure")
    error = of_type(events, "attempt")[0].get("error")
    assert "s3cret" not in error and "bob:***@db.internal" in error
    assert len(error) <= 500


async def test_attempts_go_on_while_the_history_stream_is_deleted(
    broker: TestBroker, run_worker: Any
) -> None:
    """Deleting the stream under a worker: every task still succeeds, and the drops are counted."""
    recorder = Recorder()
    worker: Worker = await run_worker(registry(job=recorder))
    channel = await broker.channel()
    await channel.queue_delete(broker.names.history_stream)
    for _ in range(20):
        await publish(broker, envelope("job"), plan(100))
    await recorder.wait_calls(20)
    await worker.join()
    assert await broker.depth(broker.names.main_queue) == 0
    assert await broker.depth(broker.names.failed_queue) == 0

    async def counted() -> bool:
        return worker.history.dropped >= 20

    await eventually(counted, what="20 history events counted as dropped")


def lost(process: str) -> float:
    """What the monitor's ``cron_history_events_lost_total`` says of ``process``."""
    found = REGISTRY.get_sample_value("cron_history_events_lost_total", {"process": process})
    return found or 0.0


async def test_the_monitor_counts_what_a_worker_dropped_once_the_stream_is_back(
    broker: TestBroker, run_worker: Any, run_monitor: Any
) -> None:
    """A worker without metrics loses its events while the stream is deleted; once a starting
    monitor declares it again, the idle worker reports the loss and the monitor counts it
    once; the report is no run."""
    recorder = Recorder()
    worker: Worker = await run_worker(registry(job=recorder))
    await (await broker.channel()).queue_delete(broker.names.history_stream)
    for _ in range(5):
        await publish(broker, envelope("job"), plan(100))
    await recorder.wait_calls(5)
    # Each quick attempt writes one event: its end, which tells its start.
    await eventually(lambda: worker.history.dropped >= 5, what="5 history events dropped")
    counted_before = lost("worker")
    monitor = await run_monitor(monitor_interval_seconds=0.1)

    def folded() -> bool:
        return bool(monitor.keeper.fold.lost.get("worker") == worker.history.dropped)

    await eventually(folded, what="the idle worker's loss folded")
    await eventually(lambda: lost("worker") - counted_before == worker.history.dropped)
    after = envelope("job")
    await publish(broker, after, plan(100))
    events = await wait_history(broker, lambda e: bool(of_type(e, "attempt")), "the next attempt")
    [report] = of_type(events, "dropped")
    assert (report.get("count"), report.get("pid"), report.run_id) == (
        worker.history.dropped,
        os.getpid(),
        None,
    )
    since, until = (datetime.fromisoformat(report.get(key)) for key in ("since", "until"))
    assert since <= until <= report.at
    assert list(fold_runs(events)) == [after.run_id], "a report of dropped events is no run"
