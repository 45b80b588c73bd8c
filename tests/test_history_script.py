"""warren history against a real broker: the runs of a namespace, and one run's story."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from tests.conftest import plan
from tests.failed_records import json_out, put_failed, run_warren
from tests.helpers import Recorder, attempt_ended, envelope, publish, registry, wait_history
from tests.namespace import TestBroker
from warren_cron.envelope import Envelope
from warren_cron.errors import PermanentError
from warren_cron.worker.context import TaskContext

pytestmark = pytest.mark.broker


async def test_show_tells_a_runs_story_through_retries_failure_and_replay(
    broker: TestBroker, run_worker: Any
) -> None:
    """Three failing attempts, the failure, a replay, a success: all of it, in order."""
    handler = Recorder(failures=3)
    await run_worker(registry(job=handler))
    env = envelope("job", schedule="nightly")
    await publish(broker, env, plan(50, 100))
    await broker.wait_depth(broker.names.failed_queue, 1)
    broker.plan_keys.add("50ms")
    replay = run_warren(
        broker, "failed", "replay", "--all", "--max-retries", "1", "--delay-ms", "50"
    )
    assert replay.returncode == 0, replay.stderr
    await wait_history(broker, attempt_ended(env.run_id, "succeeded"), "the replay's attempt")

    story = json_out(run_warren(broker, "history", "show", env.run_id, "--json"))
    assert (story["run_id"], story["schedule"], story["task"]) == (env.run_id, "nightly", "job")
    assert (story["outcome"], story["attempts"], story["replays"]) == ("succeeded", 4, 1)
    events = story["events"]
    assert [e["type"] for e in events] == ["attempt"] * 3 + ["failed", "replayed", "attempt"]
    attempts = [e for e in events if e["type"] == "attempt"]
    assert [(a["attempt"], a["outcome"]) for a in attempts] == [
        (1, "retrying"),
        (2, "retrying"),
        (3, "failed"),
        (1, "succeeded"),
    ]
    errors = [f"RuntimeError: failure {n}" for n in (1, 2, 3)]
    assert [a["error"] for a in attempts] == [*errors, None]
    assert story["last_error"] == errors[-1]
    assert all(a["duration_ms"] >= 0 for a in attempts)
    assert all(datetime.fromisoformat(e["at"]).utcoffset() is not None for e in events)
    assert all(e["at"].endswith("Z") for e in events)
    failed, replayed = events[3], events[4]
    assert (failed["reason"], failed["attempts"]) == ("retries-exhausted", 3)
    assert (replayed["plan"], replayed["replay"]) == ("50ms", 1)
    assert "@" in replayed["by"]


async def test_show_for_people_is_a_timeline_with_the_wait_before_each_attempt(
    broker: TestBroker, run_worker: Any
) -> None:
    """One line per event; a retry says how long it waited and why the attempt before failed."""
    await run_worker(registry(job=Recorder(failures=1)))
    env = envelope("job", schedule="nightly")
    await publish(broker, env, plan(200))
    await wait_history(broker, attempt_ended(env.run_id, "succeeded"), "the retry's success")
    result = run_warren(broker, "history", "show", env.run_id)
    assert result.returncode == 0, result.stderr
    header, timeline = result.stdout.split("\n\n")
    assert f"run id    : {env.run_id}" in header
    assert "outcome   : succeeded after 2 attempt(s)" in header
    first, second = timeline.splitlines()
    assert "attempt 1   retrying (exception," in first and first.endswith("RuntimeError: failure 1")
    waited = second.split("after waiting ")[1].split("s ")[0]
    assert "attempt 2   succeeded" in second and float(waited) >= 0.15


async def test_list_shows_the_newest_runs_first_with_their_outcome(
    broker: TestBroker, run_worker: Any
) -> None:
    """One line per run; --schedule, --outcome and --limit narrow it; --json for machines."""

    async def broken(payload: Any, ctx: TaskContext) -> None:
        raise PermanentError("the report template is gone")

    await run_worker(registry(job=Recorder(), broken=broken))
    runs: list[Envelope] = []
    for task, schedule in (("job", "billing-eu"), ("broken", "billing-us"), ("job", "cleanup")):
        runs.append(envelope(task, schedule=schedule))
        await publish(broker, runs[-1], plan(100))
        outcome = "failed" if task == "broken" else "succeeded"
        await wait_history(broker, attempt_ended(runs[-1].run_id, outcome), f"{schedule} ended")

    def listed(*args: str) -> list[dict[str, Any]]:
        return json_out(run_warren(broker, "history", "--json", *args))  # type: ignore[no-any-return]

    newest = [run.run_id for run in reversed(runs)]
    everything = listed()
    assert [r["run_id"] for r in everything] == newest
    assert [(r["schedule"], r["outcome"], r["attempts"]) for r in everything] == [
        ("cleanup", "succeeded", 1),
        ("billing-us", "failed", 1),
        ("billing-eu", "succeeded", 1),
    ]
    assert [r["run_id"] for r in listed("--schedule", "billing-*")] == newest[1:]
    [failed] = listed("--outcome", "failed", "--since", "1h")
    assert failed["last_error"] == "PermanentError: the report template is gone"
    assert [r["run_id"] for r in listed("--limit", "2")] == newest[:2]

    table = run_warren(broker, "history", "list", "--schedule", "billing-us")
    assert table.returncode == 0, table.stderr
    head, row = table.stdout.splitlines()
    columns = ["RUN ID", "SCHEDULE", "TASK", "ATTEMPTS", "OUTCOME", "TOOK", "LAST ERROR"]
    assert [c.strip() for c in head.split("  ") if c.strip()] == columns
    assert row.split()[:5] == [runs[1].run_id, "billing-us", "broken", "1", "failed"]
    assert row.endswith("PermanentError: the report template is gone")
    narrow = run_warren(broker, "history", "--schedule", "billing-us", COLUMNS="130")
    assert [len(line) for line in narrow.stdout.splitlines()][1] == 130
    assert narrow.stdout.rstrip().endswith("…")


async def test_purge_writes_each_record_to_the_history_and_a_dry_run_writes_nothing(
    broker: TestBroker,
) -> None:
    """A purged event per record deleted, naming who; a dry-run replay leaves no event."""
    envs = await put_failed(broker, 2, schedule="nightly")
    dry = run_warren(broker, "failed", "replay", "--all", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    purge = run_warren(broker, "failed", "purge", "--all", "--yes")
    assert purge.returncode == 0, purge.stderr
    events = await wait_history(
        broker, lambda e: len([x for x in e if x.type == "purged"]) == 2, "two purged events"
    )
    assert [(e.type, e.run_id) for e in events] == [("purged", env.run_id) for env in envs]
    assert all(e.schedule == "nightly" and "@" in e.get("by") for e in events)
    story = json_out(run_warren(broker, "history", "show", envs[0].run_id, "--json"))
    assert [e["type"] for e in story["events"]] == ["purged"]


async def test_show_of_an_unknown_run_says_where_history_ends(broker: TestBroker) -> None:
    """No event of the run: exit 1, naming the run and how to read further back."""
    await put_failed(broker, 1)
    assert run_warren(broker, "failed", "purge", "--all", "--yes").returncode == 0
    result = run_warren(broker, "history", "show", "nightly@2026-01-31T02:30:00Z")
    assert result.returncode == 1
    assert "no events for run 'nightly@2026-01-31T02:30:00Z'" in result.stderr
    assert "CRON_HISTORY_MAX_AGE" in result.stderr and "--since" in result.stderr


async def test_a_namespace_without_history_is_named_not_a_traceback(broker: TestBroker) -> None:
    """Nothing ever wrote history in the namespace: exit 1 and say so."""
    for args in (["list"], ["show", "any@2026-01-31T02:30:00Z"]):
        result = run_warren(broker, "history", *args)
        assert result.returncode == 1, result.stderr
        assert f"no history stream '{broker.names.history_stream}'" in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "code", "why"),
    [
        (["--limit", "0"], 2, "--limit"),
        (["--since", "yesterday"], 2, "--since"),
        (["--outcome", "exploded"], 2, "--outcome"),
        (["show"], 2, "RUN_ID"),
    ],
)
async def test_usage_errors_exit_2_naming_the_problem(
    broker: TestBroker, args: list[str], code: int, why: str
) -> None:
    """Bad options are refused before the broker is asked anything."""
    result = run_warren(broker, "history", *args)
    assert result.returncode == code and why in result.stderr, result.stderr


async def test_an_unreachable_broker_exits_3(broker: TestBroker) -> None:
    """No broker at CRON_AMQP_URL: exit 3 with the URL, its password hidden."""
    url = "amqp://ops:s3cret@127.0.0.1:1/"
    result = run_warren(broker, "history", "list", CRON_AMQP_URL=url)
    assert result.returncode == 3
    assert "cannot reach RabbitMQ at amqp://ops:***@127.0.0.1:1/" in result.stderr
    assert "s3cret" not in result.stderr
