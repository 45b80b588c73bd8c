"""Heartbeats without a broker: what ``ctx.heartbeat`` keeps and refuses, the watchdog's
silence, which attempts run long, and a handler's declared interval (docs/long-jobs.md)."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from warren_cron.clock import utcnow
from warren_cron.envelope import Envelope
from warren_cron.worker.context import TaskContext
from warren_cron.worker.heartbeat import Beats, progress_fields, silence
from warren_cron.worker.longrun import LongRuns, attempt_of
from warren_cron.worker.parking import (
    H_HANDOVERS,
    H_LEASE,
    H_LONG_ATTEMPT,
    copy_headers,
    handovers,
)
from warren_cron.worker.registry import Registry
from warren_cron.worker.settings import WorkerSettings


def context() -> TaskContext:
    """A context as the worker builds one."""
    return TaskContext(
        run_id="r",
        task="t",
        schedule=None,
        scheduled_for=utcnow(),
        attempt=1,
        redelivered=False,
        timeout_seconds=10,
    )


def test_a_heartbeat_keeps_its_progress_and_counts() -> None:
    """Each heartbeat counts; the progress kept is the last one given."""
    ctx = context()
    assert not hasattr(ctx, "beats")  # a context costs no heartbeat state until one comes
    ctx.heartbeat({"done": 1, "of": 9})
    ctx.heartbeat()
    fields = progress_fields(ctx.beats)
    assert orjson.loads(orjson.dumps(fields)) == {"progress": {"done": 1, "of": 9}, "heartbeats": 2}


def test_progress_that_is_no_small_json_is_refused_naming_what_to_pass() -> None:
    """A value that is no JSON, or too large, is a clear error at the call."""
    ctx = context()
    with pytest.raises(ValueError, match="progress must be JSON"):
        ctx.heartbeat({"when": object()})
    with pytest.raises(ValueError, match="over 4096"):
        ctx.heartbeat({"rows": list(range(5000))})


def test_history_gets_a_summary_on_change_or_now_and_then_never_per_heartbeat() -> None:
    """A summary is due when the progress changed and an interval passed since the last,
    or, with the same progress, when heartbeats came and ten intervals passed."""
    beats = Beats()
    beats.beat({"done": 1})
    assert beats.summary_due(0)
    beats.mark_written()
    beats.beat({"done": 1})
    assert not beats.summary_due(1)  # unchanged, written a moment ago
    progress, _, count = beats.written
    beats.written = (progress, time.monotonic() - 10, count)
    assert beats.summary_due(1)  # still beating after ten intervals: shown alive
    beats.mark_written()
    assert not beats.summary_due(0)  # no heartbeat since
    beats.beat({"done": 2})
    assert not beats.summary_due(60)  # changed, but written a moment ago


async def test_the_watchdog_says_silence_after_the_allowed_misses() -> None:
    """Silent for three intervals of 0.1 s: the watchdog returns after about 0.3 s."""
    beats = Beats()
    began = time.monotonic()
    why = await asyncio.wait_for(silence(beats, 0.1, 3), 5)
    assert time.monotonic() - began >= 0.3
    assert "3 intervals of 0.1 s" in why


async def test_heartbeats_keep_the_watchdog_away() -> None:
    """A handler heartbeating faster than its interval is never called silent."""
    beats = Beats()
    watching = asyncio.create_task(silence(beats, 0.1, 3))
    for _ in range(10):
        beats.beat()
        await asyncio.sleep(0.05)
    assert not watching.done()
    watching.cancel()


def test_long_attempts_are_those_past_the_consumer_timeouts_bound_or_heartbeating() -> None:
    """Above 0.9 x the consumer timeout, or with a heartbeat: long; else not."""
    runs = LongRuns(WorkerSettings(consumer_timeout_seconds=100, task_timeout_seconds=50))
    registry = Registry()
    registry.register("beating", lambda payload, ctx: None, heartbeat=60)
    registry.register("t", lambda payload, ctx: None)
    runs.use(registry)
    plain = Envelope(task="t", run_id="r", scheduled_for=utcnow())
    assert not runs.wanted(plain)
    assert not runs.wanted(plain.model_copy(update={"timeout_seconds": 90.0}))
    assert runs.wanted(plain.model_copy(update={"timeout_seconds": 21600.0}))
    assert runs.wanted(plain.model_copy(update={"task": "beating"}))


def test_a_handed_over_copy_keeps_its_attempt_and_a_retry_counts_on() -> None:
    """A parked copy runs its attempt again; a retry a long attempt sent counts from it."""
    assert attempt_of({}, 1) == 1
    assert attempt_of({H_LONG_ATTEMPT: 2, H_LEASE: 5}, 1) == 2
    assert attempt_of({H_LONG_ATTEMPT: 2}, 1) == 3


def test_a_handler_declares_its_heartbeat_interval() -> None:
    """``heartbeat=`` takes seconds or a duration; anything else names how to write it."""
    registry = Registry()

    @registry.task("export", heartbeat="1m")
    async def export(payload: object, ctx: TaskContext) -> None:
        """A long task."""

    registered = registry.get("export")
    assert registered is not None and registered.heartbeat_seconds == 60
    with pytest.raises(ValueError, match='duration \\("30s", "5m"\\)'):
        registry.register("bad", export, heartbeat="often")


def test_a_parked_copy_carries_its_attempt_and_counts_hand_overs_not_death_history() -> None:
    """A copy drops x-death (RabbitMQ 4 ignores a client's) and its lease number, keeps the
    attempt, and a copy made of a copy that came back counts one hand-over more."""
    first = copy_headers({"x-death": [{"count": 1}], "cron-run-id": "r"}, attempt=2)
    assert first == {"cron-run-id": "r", H_LONG_ATTEMPT: 2}
    again = copy_headers({**first, H_LEASE: 7}, attempt=2)
    assert again[H_HANDOVERS] == 1 and H_LEASE not in again
    assert handovers(copy_headers({**again, H_LEASE: 1}, attempt=2)) == 2
