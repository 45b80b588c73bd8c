"""``warren schedules backfill``: past fires with their run ids, each sent once."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import registry
from tests.namespace import TestBroker
from tests.pausing import matching, schedules_script, wait_events
from tests.scheduling import published, write_schedules
from warren_cron.client import Client
from warren_cron.clock import utc_text, utcnow
from warren_cron.worker.context import TaskContext

pytestmark = pytest.mark.broker
MINUTE = timedelta(minutes=1)


def _minutes_ago(n: int) -> str:
    return utc_text((utcnow() - n * MINUTE).replace(second=0, microsecond=0))


async def test_backfill_twice_sends_each_run_id_once(broker: TestBroker, tmp_path: Path) -> None:
    """A dry run sends nothing; a part of the range, then the whole, then the whole again:
    each fire of the range is published once, with the run id its fire would have had."""
    await broker.declare()
    path = tmp_path / "schedules.toml"
    [schedule] = write_schedules(
        broker, path, '[[schedule]]\nname = "m"\nevery = "1m"\ntask = "noop"\n'
    ).schedules
    wide = ("--from", _minutes_ago(10), "--to", _minutes_ago(1), "--rate", "100")
    dry = await schedules_script(broker, path, "backfill", "m", *wide, "--dry-run")
    assert dry.returncode == 0 and "10 of 10 fire(s) to send" in dry.stdout, dry.stderr
    assert await broker.depth(broker.names.main_queue) == 0
    part = ("--from", _minutes_ago(5), "--to", _minutes_ago(3))
    assert (await schedules_script(broker, path, "backfill", "m", *part)).returncode == 0
    await wait_events(broker, 3, type="fired", backfill=True)
    for expected in ("sent 7 of 10", "0 of 10 fire(s) to send"):
        again = await schedules_script(broker, path, "backfill", "m", *wide)
        assert again.returncode == 0 and expected in again.stdout, again.stdout + again.stderr
        await wait_events(broker, 10, type="fired", backfill=True)
    messages = await published(broker)
    ids = Counter(envelope.run_id for _, envelope in messages)
    assert len(ids) == 10 and set(ids.values()) == {1}
    assert all(e.run_id == schedule.run_id(e.scheduled_for) for _, e in messages)


async def test_a_bad_range_or_an_unknown_schedule_exits_2(
    broker: TestBroker, tmp_path: Path
) -> None:
    """--to before --from, a future --to, a time without zone, an unknown name: exit 2."""
    await broker.declare()
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, '[[schedule]]\nname = "m"\nevery = "1m"\ntask = "noop"\n')
    future = utc_text(utcnow() + MINUTE)
    for args, says in [
        (("m", "--from", _minutes_ago(1), "--to", _minutes_ago(5)), "--to is before --from"),
        (("m", "--from", _minutes_ago(1), "--to", future), "in the future"),
        (("m", "--from", "2026-01-01T00:00", "--to", _minutes_ago(1)), "no time zone"),
        (("nope", "--from", _minutes_ago(5), "--to", _minutes_ago(1)), "nope"),
    ]:
        refused = await schedules_script(broker, path, "backfill", *args)
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr
    assert await broker.depth(broker.names.main_queue) == 0


async def test_a_forbid_runtime_schedule_is_backfilled_one_run_at_a_time(
    broker: TestBroker, client: Client, run_worker: Any, tmp_path: Path
) -> None:
    """concurrency = Forbid: each backfilled run ends before the next is sent, so none is
    skipped as lock-contended although the handler takes a while."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, "")

    async def slow(payload: Any, ctx: TaskContext) -> None:
        await asyncio.sleep(0.5)

    await run_worker(registry(slow=slow), prefetch=10)
    spec = {"name": "f", "every": "1m", "task": "slow", "concurrency": "Forbid"}
    await client.create_schedule(spec)
    span = ("--from", _minutes_ago(3), "--to", _minutes_ago(1))
    done = await schedules_script(broker, path, "backfill", "f", *span)
    assert done.returncode == 0 and "sent 3 of 3" in done.stdout, done.stdout + done.stderr
    events = await wait_events(broker, 3, type="attempt", schedule="f", outcome="succeeded")
    assert matching(events, type="attempt", outcome="lock-contended") == []
