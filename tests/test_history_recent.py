"""The newest runs, read in growing windows, and one run's story, read no further than it
can go: no more of the stream than the answer needs."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from aio_pika.abc import AbstractConnection

from tests.conftest import plan
from tests.helpers import (
    Recorder,
    attempt_ended,
    envelope,
    fired_and_tried,
    publish,
    registry,
    wait_history,
    write_history,
)
from tests.namespace import TestBroker
from warren_cron.clock import utc_text, utcnow
from warren_cron.history import recent
from warren_cron.history.events import event
from warren_cron.history.reader import Budget, Start
from warren_cron.history.recent import CLOCK_SLACK, FIRST_WINDOW, one_run, recent_runs, story_start
from warren_cron.history.run_fold import Run

pytestmark = pytest.mark.broker


async def test_a_run_older_than_the_first_window_is_found_in_a_wider_one(
    broker: TestBroker, run_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read as if ten minutes later: the 5-minute window is empty, the 20-minute one has it."""
    await run_worker(registry(job=Recorder()))
    env = envelope("job")
    await publish(broker, env, plan(100))
    await wait_history(broker, attempt_ended(env.run_id, "succeeded"), "the run's end")
    starts: list[Start] = []
    runs_from = recent.runs_from

    async def counted(
        connection: AbstractConnection, stream: str, start: Start, budget: Budget | None = None
    ) -> list[Run]:
        starts.append(start)
        return await runs_from(connection, stream, start, budget)

    monkeypatch.setattr(recent, "runs_from", counted)
    stream = broker.names.history_stream

    async def newest(now: datetime, want: recent.Want = lambda run: True) -> list[str]:
        found = await recent_runs(broker.connection, stream, want, 1, now - timedelta(hours=1), now)
        return [run.run_id for run in found]

    now = utcnow()
    assert await newest(now) == [env.run_id]
    assert starts == [now - FIRST_WINDOW]
    starts.clear()
    later = now + timedelta(minutes=10)
    assert await newest(later) == [env.run_id]
    assert starts == [later - FIRST_WINDOW, later - 4 * FIRST_WINDOW]
    starts.clear()
    assert await newest(later, lambda run: False) == []
    assert starts == [later - FIRST_WINDOW, later - 4 * FIRST_WINDOW, later - timedelta(hours=1)]


async def test_a_settled_runs_story_ends_past_its_end_and_a_failed_ones_at_the_streams_end(
    broker: TestBroker,
) -> None:
    """A run that succeeded gets no event after its end, so its read stops once the stream
    is CLOCK_SLACK past that end: its fire published late is still in, while an event
    published long after is never read. A failed run may be replayed any time later: its
    read goes on to the end."""
    at = utcnow().replace(microsecond=0) - timedelta(hours=2)
    done, broken = f"done@{utc_text(at)}", f"broken@{utc_text(at)}"
    fired, succeeded = fired_and_tried(done, at, "succeeded")
    minutes = int(CLOCK_SLACK.total_seconds() // 60) + 3

    def other(minute: int) -> list[dict[str, Any]]:
        return fired_and_tried(f"other@{minute}", at + timedelta(minutes=minute), "succeeded")

    late = at + timedelta(minutes=minutes + 1)
    await write_history(
        broker,
        [succeeded, *fired_and_tried(broken, at, "failed")],
        [fired, *other(1)],  # the scheduler's batch reached the stream after the worker's
        *(other(minute) for minute in range(2, minutes + 1)),
        [event("purged", at=late, run_id=done), event("replayed", at=late, run_id=broken)],
    )
    stream = broker.names.history_stream
    run = await one_run(broker.connection, stream, done, story_start(done, None))
    assert run is not None and run.outcome == "succeeded" and not run.purged
    assert [e.type for e in run.in_order()] == ["fired", "attempt"]
    run = await one_run(broker.connection, stream, broken, story_start(broken, None))
    assert run is not None and run.outcome == "running" and run.replays == 1
    assert [e.type for e in run.in_order()] == ["fired", "attempt", "replayed"]
