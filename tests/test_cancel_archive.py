"""Archive of a runtime schedule cancels its pending work on a real broker: a fire waiting in
a retry queue, or not yet taken, ends ``cancelled`` in the history instead of running."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import plan
from tests.helpers import Recorder, envelope, publish, registry
from tests.namespace import TestBroker
from tests.test_cancel import attempts_end
from warren_cron.client import Client

pytestmark = pytest.mark.broker


async def test_archive_while_a_fire_waits_in_a_retry_queue_ends_it_cancelled(
    broker: TestBroker, client: Client, run_worker: Any
) -> None:
    """A fire of ``rt`` failed once and waits 3 s to retry; ``rt`` is archived: the retry is
    acked cancelled, the handler is not called again, and the error names who archived."""
    await client.create_schedule({"name": "rt", "every": "1h", "task": "job"})
    job = Recorder(failures=5)
    await run_worker(registry(job=job))
    fire = envelope("job", schedule="rt")
    await publish(broker, fire, plan(3000))
    handle = client.run(fire.run_id)
    await attempts_end(handle, "retrying")
    await client.archive_schedule("rt", by="ops", reason="customer gone")
    status = await attempts_end(handle, "cancelled")
    assert len(job.calls) == 1 and status.state == "cancelled"
    assert "archived" in (status.attempts[-1].error or "")
    assert "customer gone" in (status.attempts[-1].error or "")


async def test_a_fire_not_yet_taken_is_cancelled_and_another_schedules_fire_runs(
    broker: TestBroker, client: Client, run_worker: Any
) -> None:
    """Fires published before the archive with no worker running: the archived schedule's
    ends cancelled once a worker starts; another schedule's fire runs."""
    await client.create_schedule({"name": "gone", "every": "1h", "task": "job"})
    stopped, kept = envelope("job", schedule="gone"), envelope("job", schedule="kept")
    await publish(broker, stopped, plan(1000))
    await publish(broker, kept, plan(1000))
    await client.archive_schedule("gone")
    job = Recorder()
    await run_worker(registry(job=job))
    await attempts_end(client.run(stopped.run_id), "cancelled")
    await attempts_end(client.run(kept.run_id), "succeeded")
    assert [ctx.run_id for _, ctx in job.calls] == [kept.run_id]
