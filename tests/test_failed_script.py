"""warren failed against a real broker: nothing leaves the failed queue unless asked."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import aio_pika
import orjson
import pytest

from tests.conftest import plan
from tests.failed_records import ids_in, json_out, put_failed, run_warren
from tests.helpers import Recorder, envelope, publish, publish_raw, registry
from tests.namespace import TestBroker
from warren_cron import codec
from warren_cron.clock import utcnow
from warren_cron.declare import UNLIMITED_DELIVERIES
from warren_cron.failed.select import RecordFilter
from warren_cron.failed.store import read_records

pytestmark = pytest.mark.broker


async def test_list_shows_a_table_and_leaves_every_record_in_order(broker: TestBroker) -> None:
    """The table names run id, schedule, task, attempts, reason and time; the queue is unchanged."""
    envs = await put_failed(broker, 3, schedule="nightly", task="report")
    before = await ids_in(broker, broker.names.failed_queue)
    result = run_warren(broker, "failed", "list")
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    columns = ("RUN ID", "SCHEDULE", "TASK", "ATTEMPTS", "REASON", "FAILED AT", "REPLAYS")
    assert [c.strip() for c in header.split("  ") if c.strip()] == list(columns)
    assert [row.split()[0] for row in rows] == [env.run_id for env in envs]
    assert rows[0].split()[1:5] == ["nightly", "report", "4", "retries-exhausted"]
    assert await ids_in(broker, broker.names.failed_queue) == before


async def test_list_filters_by_schedule_task_reason_since_and_limit(broker: TestBroker) -> None:
    """Each filter narrows the rows; --json gives the same fields to machines."""
    old = utcnow() - timedelta(hours=3)
    await put_failed(broker, 1, schedule="billing-eu", failed_at=old)
    await put_failed(broker, 2, schedule="billing-us", task="http")
    await put_failed(broker, 1, schedule="cleanup", reason="unknown-task", attempts=1)

    def rows(*args: str) -> list[dict[str, Any]]:
        return json_out(run_warren(broker, "failed", "list", "--json", *args))  # type: ignore[no-any-return]

    assert {r["schedule"] for r in rows("--schedule", "billing-*")} == {"billing-eu", "billing-us"}
    assert [r["task"] for r in rows("--task", "http")] == ["http", "http"]
    [unknown] = rows("--reason", "unknown-task")
    assert (unknown["schedule"], unknown["attempts"]) == ("cleanup", 1)
    assert "billing-eu" not in {r["schedule"] for r in rows("--since", "1h")}
    assert len(rows("--schedule", "billing-*", "--limit", "1")) == 1
    assert await broker.depth(broker.names.failed_queue) == 4


async def test_listing_a_quorum_failed_queue_many_times_drops_nothing(broker: TestBroker) -> None:
    """25 reads of a quorum failed queue (4.x drops after 20 by default) keep all, in order."""
    broker.queue_type = "quorum"
    envs = await put_failed(broker, 5)
    for _ in range(25):
        records = await read_records(broker.connection, broker.names, RecordFilter())
        assert [r.run_id for r in records] == [env.run_id for env in envs]
    assert await ids_in(broker, broker.names.failed_queue) == [env.run_id for env in envs]
    # The queue carries a limit nobody reaches (without one, 4.x would apply 20): declaring it
    # with exactly that limit is accepted as equivalent, and would be refused otherwise.
    channel = await broker.channel()
    await channel.declare_queue(
        broker.names.failed_queue,
        durable=True,
        arguments={"x-queue-type": "quorum", "x-delivery-limit": UNLIMITED_DELIVERIES},
    )


async def test_records_the_broker_dead_lettered_alone_get_a_derived_reason(
    broker: TestBroker,
) -> None:
    """A NACK at final reads as retries-exhausted, an undeclared plan as no-retry-queue."""
    await broker.declare()
    for key, run_id in (("final", "r-final"), ("7s-9s", "r-unrouted")):
        await publish_raw(broker, codec.encode(envelope("job")), key, message_id=run_id)
        await broker.reject_head()
    await broker.wait_depth(broker.names.failed_queue, 2)
    rows = json_out(run_warren(broker, "failed", "list", "--json"))
    assert [(r["run_id"], r["reason"], r["attempts"]) for r in rows] == [
        ("r-final", "retries-exhausted", 1),
        ("r-unrouted", "no-retry-queue", 1),
    ]
    assert all(r["failed_at"] for r in rows)


async def test_show_prints_the_payload_headers_and_history(
    broker: TestBroker, run_worker: Any
) -> None:
    """show RUN_ID gives the reason, the error, the payload and the broker's history."""
    await run_worker(registry(job=Recorder(failures=100)))
    env = envelope("job", {"customer": "acme"}, schedule="nightly")
    await publish(broker, env, plan(50))
    await broker.wait_depth(broker.names.failed_queue, 1)
    result = run_warren(broker, "failed", "show", env.run_id)
    assert result.returncode == 0, result.stderr
    for expected in ("retries-exhausted", "RuntimeError: failure 2", '"customer": "acme"'):
        assert expected in result.stdout
    assert "x-death history" in result.stdout
    assert broker.names.retry_queue("50ms") in result.stdout
    missing = run_warren(broker, "failed", "show", "no-such-run")
    assert missing.returncode == 1 and "no-such-run" in missing.stderr


async def test_replay_with_a_filter_moves_only_matches_and_keeps_the_rest_in_order(
    broker: TestBroker,
) -> None:
    """Matching records go to the main queue with a fresh plan; the others stay, in order."""
    envs = []
    for name in ("a", "b", "a", "b", "a"):
        envs += await put_failed(broker, 1, schedule=name)
    broker.plan_keys.add("100ms")
    result = run_warren(
        broker, "failed", "replay", "--schedule", "a", "--max-retries", "1", "--delay-ms", "100"
    )
    assert result.returncode == 0, result.stderr
    assert "replayed 3 of 3" in result.stderr
    kept = [envs[1].run_id, envs[3].run_id]
    assert await ids_in(broker, broker.names.failed_queue) == kept
    moved = await broker.get_all(broker.names.main_queue)
    assert [m.message_id for m in moved] == [envs[0].run_id, envs[2].run_id, envs[4].run_id]
    first = moved[0]
    assert first.routing_key == "100ms" and first.body == codec.encode(envs[0])
    assert first.headers["cron-replays"] == 1 and first.headers["cron-run-id"] == envs[0].run_id
    assert "x-death" not in first.headers and "cron-reason" not in first.headers
    [history] = first.headers["cron-history"]
    assert (history["reason"], history["attempts"]) == ("retries-exhausted", 4)


async def test_a_replayed_task_that_still_fails_runs_its_plan_again_and_returns(
    broker: TestBroker, run_worker: Any
) -> None:
    """After a replay the worker counts attempts from 1; the new record says replay 1."""
    recorder = Recorder(failures=100)
    await run_worker(registry(job=recorder))
    env = envelope("job", schedule="nightly")
    await publish(broker, env, plan(50))
    await broker.wait_depth(broker.names.failed_queue, 1)
    broker.plan_keys.update({"50ms-100ms", "100ms"})
    result = run_warren(
        broker, "failed", "replay", "--all", "--max-retries", "2", "--delay-ms", "50"
    )
    assert result.returncode == 0, result.stderr
    await recorder.wait_calls(5)
    await broker.wait_depth(broker.names.failed_queue, 1)
    [record] = await broker.get_all(broker.names.failed_queue)
    assert [ctx.attempt for _, ctx in recorder.calls] == [1, 2, 1, 2, 3]
    assert {ctx.run_id for _, ctx in recorder.calls} == {env.run_id}
    assert record.headers["cron-replays"] == 1 and record.headers["cron-attempts"] == 3
    assert record.headers["cron-history"][0]["attempts"] == 2


async def test_a_dry_run_counts_and_moves_nothing(broker: TestBroker) -> None:
    """--dry-run says how many would move; both queues stay as they were."""
    envs = await put_failed(broker, 3)
    result = run_warren(broker, "failed", "replay", "--all", "--dry-run")
    assert result.returncode == 0 and "would replay 3" in result.stderr
    assert await ids_in(broker, broker.names.failed_queue) == [e.run_id for e in envs]
    assert await broker.depth(broker.names.main_queue) == 0


async def test_purge_with_export_round_trips_through_restore(
    broker: TestBroker, tmp_path: Path
) -> None:
    """Purged records are in the export file first, and restore puts them back the same."""
    await put_failed(broker, 2, schedule="keep")
    await put_failed(broker, 2, schedule="drop", reason="permanent-error", attempts=1)
    before = json_out(run_warren(broker, "failed", "list", "--json", "--schedule", "drop"))
    out = tmp_path / "dropped.jsonl"
    result = run_warren(
        broker, "failed", "purge", "--schedule", "drop", "--export", str(out), "--yes"
    )
    assert result.returncode == 0 and "purged 2" in result.stderr, result.stderr
    assert json_out(run_warren(broker, "failed", "list", "--json", "--schedule", "drop")) == []
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert [line["run_id"] for line in lines] == [row["run_id"] for row in before]
    assert run_warren(broker, "failed", "restore", str(out)).returncode == 0
    after = json_out(run_warren(broker, "failed", "list", "--json", "--schedule", "drop"))
    assert after == before
    assert await broker.depth(broker.names.failed_queue) == 4


async def test_purge_asks_first_and_a_no_keeps_everything(broker: TestBroker) -> None:
    """Without --yes the user must answer y; anything else purges nothing and exits 1."""
    await put_failed(broker, 2)
    declined = run_warren(broker, "failed", "purge", "--all", stdin="n\n")
    assert declined.returncode == 1 and "purge 2 record(s)" in declined.stderr
    assert await broker.depth(broker.names.failed_queue) == 2
    accepted = run_warren(broker, "failed", "purge", "--all", stdin="y\n")
    assert accepted.returncode == 0, accepted.stderr
    assert await broker.depth(broker.names.failed_queue) == 0


async def test_a_large_export_shows_progress_and_a_summary(
    broker: TestBroker, tmp_path: Path
) -> None:
    """Over a few hundred records the script reports progress on stderr."""
    await put_failed(broker, 320)
    out = tmp_path / "all.jsonl"
    result = run_warren(broker, "failed", "export", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "exporting: 320/320" in result.stderr and "exported 320" in result.stderr
    assert len(out.read_bytes().splitlines()) == 320
    assert await broker.depth(broker.names.failed_queue) == 320


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["replay"], "needs a filter"),
        (["purge", "--task", ""], "needs a filter"),
        (["list", "--since", "yesterday"], "--since"),
        (["replay", "--all", "--multiplier", "0.5"], "--multiplier"),
        (["replay", "--all", "--rate", "0"], "--rate"),
        (["list", "--limit", "0"], "--limit"),
        (["frobnicate"], "invalid choice"),
    ],
)
async def test_usage_errors_exit_2_naming_the_problem(
    broker: TestBroker, args: list[str], why: str
) -> None:
    """Bad input is refused before anything is read or moved."""
    result = run_warren(broker, "failed", *args)
    assert result.returncode == 2 and why in result.stderr, result.stderr


async def test_export_never_overwrites_a_file(broker: TestBroker, tmp_path: Path) -> None:
    """An existing file may hold the only copy of purged records: it is refused."""
    existing = tmp_path / "old.jsonl"
    existing.write_text("precious\n")
    result = run_warren(broker, "failed", "export", "--out", str(existing))
    assert result.returncode == 2 and "already exists" in result.stderr
    assert existing.read_text() == "precious\n"


async def test_a_mistyped_namespace_is_an_error_not_an_empty_list(broker: TestBroker) -> None:
    """Looking at a namespace with no failed queue says so instead of creating one."""
    result = run_warren(broker, "failed", "list")
    assert result.returncode == 2 and "CRON_NAMESPACE" in result.stderr
    assert not await _exists(broker, broker.names.failed_queue)


async def _exists(broker: TestBroker, queue: str) -> bool:
    channel = await broker.channel()
    try:
        await channel.declare_queue(queue, passive=True)
    except aio_pika.exceptions.ChannelNotFoundEntity:
        return False
    await channel.close()
    return True


async def test_replay_uses_the_schedules_own_plan_from_the_schedules_file(
    broker: TestBroker, tmp_path: Path
) -> None:
    """Without plan options a record of a schedule gets that schedule's plan, others the default."""
    schedules = tmp_path / "schedules.toml"
    schedules.write_text(
        '[[schedule]]\nname = "nightly"\nevery = "1h"\ntask = "job"\n'
        "retry = { max_retries = 1, delay_ms = 200 }\n"
    )
    [own] = await put_failed(broker, 1, schedule="nightly")
    [other] = await put_failed(broker, 1, schedule="gone")
    broker.plan_keys.update({"200ms", "300ms"})
    result = run_warren(
        broker,
        "failed",
        "replay",
        "--all",
        CRON_SCHEDULES_FILE=str(schedules),
        CRON_MAX_RETRIES="1",
        CRON_RETRY_DELAY_MS="300",
    )
    assert result.returncode == 0, result.stderr
    moved = {m.message_id: m.routing_key for m in await broker.get_all(broker.names.main_queue)}
    assert moved == {own.run_id: "200ms", other.run_id: "300ms"}
