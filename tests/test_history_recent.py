"""The newest runs, read in growing windows: no more of the stream than the answer needs."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from aio_pika.abc import AbstractConnection

from tests.conftest import plan
from tests.helpers import Recorder, attempt_ended, envelope, publish, registry, wait_history
from tests.namespace import TestBroker
from topology.envelope import utcnow
from topology.history import recent
from topology.history.reader import Start
from topology.history.recent import FIRST_WINDOW, recent_runs
from topology.history.runs import Run

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

    async def counted(connection: AbstractConnection, stream: str, start: Start) -> list[Run]:
        starts.append(start)
        return await runs_from(connection, stream, start)

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
