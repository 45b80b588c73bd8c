"""``warren runs cancel`` on a real broker: one run, a bulk cancel by schedule and state,
``--dry-run``, and the exit codes of bad usage and of a run that had ended."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import aio_pika
import pytest

from tests.failed_records import run_warren
from tests.helpers import Recorder, registry
from tests.namespace import TestBroker
from tests.test_cancel import attempts_end
from warren_cron.cli.common import EXIT_OK, EXIT_USAGE
from warren_cron.cli.runs_cancel import EXIT_ENDED
from warren_cron.client import Client
from warren_cron.clock import utc_text, utcnow
from warren_cron.history.events import encode, event

pytestmark = pytest.mark.broker


async def warren(broker: TestBroker, *args: str) -> Any:
    """``warren runs ...`` in a thread, so that in-process workers go on running."""
    return await asyncio.to_thread(run_warren, broker, "runs", *args)


async def fired_ahead(client: Client, *schedules: str) -> list[str]:
    """A ``triggered`` event per schedule for a run made now and due an hour ahead: each run
    shows ``delayed``. Returns the run ids."""
    connection, stream = await client.history_access()
    now, due = utc_text(utcnow()), utc_text(utcnow() + timedelta(hours=1))
    runs = [f"{name}@manual-{now}" for name in schedules]
    told = [
        event("triggered", run_id=r, schedule=s, task="job", scheduled_for=due, by="t")
        for r, s in zip(runs, schedules, strict=True)
    ]
    channel = await connection.channel(publisher_confirms=True)
    await channel.default_exchange.publish(aio_pika.Message(encode(told)), stream)
    await channel.close()
    return runs


async def test_bulk_dry_run_lists_the_matching_runs_and_cancels_none(
    broker: TestBroker, client: Client
) -> None:
    """``--schedule 'x*' --state delayed --dry-run`` lists xa and xb, not other; all stay
    delayed. Without ``--dry-run`` both end cancelled and other stays delayed."""
    xa, xb, other = await fired_ahead(client, "xa", "xb", "other")
    args = ("cancel", "--schedule", "x*", "--state", "delayed")
    listed = await warren(broker, *args, "--dry-run")
    assert listed.returncode == EXIT_OK, listed.stderr
    assert xa in listed.stdout and xb in listed.stdout and other not in listed.stdout
    assert "2 run(s) would be cancelled" in listed.stdout
    assert {(await client.run(r).status()).state for r in (xa, xb, other)} == {"delayed"}
    done = await warren(broker, *args, "--reason", "moved to next week")
    assert done.returncode == EXIT_OK, done.stderr
    assert "2 run(s) cancelled" in done.stdout
    assert [(await client.run(r).status()).state for r in (xa, xb, other)] == [
        "cancelled",
        "cancelled",
        "delayed",
    ]


async def test_cancel_one_run_then_again_once_it_ended(
    broker: TestBroker, client: Client, run_worker: Any
) -> None:
    """A pending run is cancelled (exit 0) and never runs; cancelling it again exits 0 and
    says it was cancelled already; a run that succeeded exits 5 and says how it ended."""
    handle = client.run(await client.enqueue("job"))
    first = await warren(broker, "cancel", handle.run_id, "--reason", "duplicate")
    assert first.returncode == EXIT_OK and "cancelled" in first.stdout, first.stderr
    job = Recorder()
    await run_worker(registry(job=job))
    await attempts_end(handle, "cancelled")
    again = await warren(broker, "cancel", handle.run_id)
    assert again.returncode == EXIT_OK and "was cancelled already" in again.stdout
    assert job.calls == []
    done = client.run(await client.enqueue("job"))
    await attempts_end(done, "succeeded")
    late = await warren(broker, "cancel", done.run_id)
    assert late.returncode == EXIT_ENDED and "already ended (succeeded)" in late.stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "give a RUN_ID, or --schedule"),
        (("r1", "--schedule", "x"), "not both"),
        (("r1", "--dry-run"), "go with --schedule"),
        (("--schedule", "x", "--limit", "0"), "--limit must be"),
    ],
)
async def test_bad_usage_exits_2_and_says_what_to_fix(
    broker: TestBroker, args: tuple[str, ...], says: str
) -> None:
    """Arguments that cannot work are refused before any broker call."""
    result = await warren(broker, "cancel", *args)
    assert result.returncode == EXIT_USAGE and says in result.stderr


async def test_a_huge_reason_and_a_bad_since_exit_2(broker: TestBroker, client: Client) -> None:
    """A 10 kB reason and a --since that is no age are refused with what to fix."""
    huge = await warren(broker, "cancel", "job@x", "--reason", "x" * 10_000)
    assert huge.returncode == EXIT_USAGE and "at most 500" in huge.stderr
    since = await warren(broker, "cancel", "--schedule", "x", "--since", "yesterdayish")
    assert since.returncode == EXIT_USAGE and "since" in since.stderr
