"""``warren schedules trigger``: a run now, with the schedule's envelope, under its overlap
policy."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.conftest import plan
from tests.helpers import envelope, history, publish, registry
from tests.namespace import TestBroker
from tests.pausing import schedules_script, wait_events
from tests.scheduling import every, published, write_schedules
from warren_cron.clock import utc_text, utcnow
from warren_cron.faultkit.waits import eventually
from warren_cron.history.run_fold import fold_runs
from warren_cron.worker.context import TaskContext

pytestmark = pytest.mark.broker

FORBID = """
[[schedule]]
name = "report"
every = "1d"
task = "hold"
concurrency = "Forbid"
"""


async def test_trigger_publishes_a_run_now_even_while_the_schedule_is_paused(
    broker: TestBroker, tmp_path: Path
) -> None:
    """The schedule's task, payload, timeout, concurrency and plan, under the run id
    ``<name>@manual-<time>``; the ``triggered`` event says who."""
    path = tmp_path / "schedules.toml"
    fields = {
        "payload": "{ n = 1 }",
        "timeout_seconds": 7,
        "concurrency": '"Forbid"',
        "retry": "{ max_retries = 1, delay_ms = 100 }",
    }
    write_schedules(broker, path, every("report", "1d", **fields))
    assert (
        await schedules_script(broker, path, "pause", "report", "--reason", "r")
    ).returncode == 0
    before = utcnow()
    result = await schedules_script(broker, path, "trigger", "report")
    assert result.returncode == 0, result.stderr
    run_id = result.stdout.strip()
    [(message, env)] = await published(broker)
    assert message.message_id == env.run_id == run_id
    assert run_id == f"report@manual-{utc_text(env.scheduled_for)}"
    assert before <= env.scheduled_for <= utcnow()
    assert (env.task, env.payload, env.timeout_seconds, env.concurrency) == (
        "noop",
        {"n": 1},
        7,
        "Forbid",
    )
    assert message.routing_key == "100ms"
    [triggered] = await wait_events(broker, type="triggered")
    assert (triggered.run_id, triggered.get("plan")) == (run_id, "100ms")
    assert "@" in triggered.get("by")


async def test_a_trigger_while_a_run_holds_the_lock_of_a_forbid_schedule_ends_lock_contended(
    broker: TestBroker, run_worker: Any, tmp_path: Path
) -> None:
    """Forbid applies to a run by hand too: it is acked as lock-contended and not run."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, FORBID)
    release, calls = asyncio.Event(), []

    async def hold(payload: Any, ctx: TaskContext) -> None:
        calls.append(ctx.run_id)
        await asyncio.wait_for(release.wait(), 30)

    await run_worker(registry(hold=hold))
    running = envelope("hold", schedule="report", concurrency="Forbid")
    with capture_logs() as logs:
        await publish(broker, running, plan(60_000))
        await eventually(lambda: calls, 10)
        result = await schedules_script(broker, path, "trigger", "report")
        run_id = result.stdout.strip()

        def attempts() -> list[Any]:
            return [e for e in logs if e["event"] == "attempt" and e["run_id"] == run_id]

        [contended] = await eventually(attempts, 15)
        release.set()
    assert result.returncode == 0, result.stderr
    assert contended["outcome"] == "lock-contended"
    assert calls == [running.run_id]
    await wait_events(broker, run_id=run_id, type="attempt")
    run = fold_runs(await history(broker))[run_id]
    # Two processes write these: either may come first. The worker's mark of the attempt's
    # start (``started``) is written only if the attempt still ran at its next batch.
    assert (run.outcome, sorted(e.type for e in run.events if e.type != "started")) == (
        "lock-contended",
        ["attempt", "triggered"],
    )
