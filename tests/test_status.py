"""``warren status`` and the monitor's status fold, with a real worker, monitor and broker."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from tests.conftest import plan
from tests.failed_records import json_out, run_warren
from tests.helpers import Recorder, envelope, publish, registry
from tests.namespace import TestBroker
from tests.scheduling import write_schedules
from tests.webhook import Endpoint, bodies, conditions, serve
from warren_cron.clock import utc_text, utcnow
from warren_cron.envelope import Envelope
from warren_cron.errors import PermanentError
from warren_cron.faultkit.waits import eventually
from warren_cron.history.events import encode, event
from warren_cron.history.snapshot import read_fold
from warren_cron.history.stream import declare_history
from warren_cron.monitor import Monitor
from warren_cron.schedules.control import send_command
from warren_cron.schedules.load import ScheduleSet
from warren_cron.worker.context import TaskContext

pytestmark = pytest.mark.broker


async def refuse(payload: Any, ctx: TaskContext) -> None:
    """A handler whose every run fails for good."""
    raise PermanentError("the report service said no")


def handlers() -> dict[str, Any]:
    """Tasks that succeed (ok), fail for good (bad), and fail to be retried (flaky)."""
    return {"ok": Recorder(), "bad": refuse, "flaky": Recorder(failures=1000)}


def schedules_file(broker: TestBroker, path: Path, *entries: str) -> tuple[ScheduleSet, str]:
    """A schedules file of hourly schedules, one per ``name:task[:expect_success_within]``;
    names get a prefix of their own, as the metrics of every test share one registry."""
    prefix = f"s{uuid.uuid4().hex[:6]}-"
    tables = []
    for entry in entries:
        name, task, *expect = entry.split(":")
        extra = f'expect_success_within = "{expect[0]}"\n' if expect else ""
        tables.append(f'[[schedule]]\nname = "{prefix}{name}"\nevery = "1h"\ntask = "{task}"\n')
        tables[-1] += extra
    return write_schedules(broker, path, "\n".join(tables)), prefix


async def run_of(broker: TestBroker, schedule: str, task: str, delay_ms: int = 60_000) -> Envelope:
    """Publish one run of ``schedule`` as its fire would be, and its ``fired`` event."""
    env = envelope(task, schedule=schedule, run_id=f"{schedule}@{utc_text(utcnow())}")
    fired = event(
        "fired",
        run_id=env.run_id,
        schedule=schedule,
        task=task,
        scheduled_for=utc_text(env.scheduled_for),
    )
    await append_history(broker, [fired])
    await publish(broker, env, plan(delay_ms))
    return env


async def append_history(broker: TestBroker, events: list[dict[str, Any]]) -> None:
    """Append events to the history stream, as a process's history publisher does."""
    await declare_history(broker.connection, broker.names, broker.settings())
    channel = await broker.connection.channel(publisher_confirms=True)
    await channel.default_exchange.publish(
        aio_pika.Message(encode(events)), broker.names.history_stream, mandatory=True
    )
    await channel.close()


async def pause(broker: TestBroker, schedule: str) -> None:
    """Pause a schedule, as ``warren schedules pause`` does."""
    command = event("paused", schedule=schedule, by="ops@test", reason="maintenance")
    await send_command(broker.connection, broker.names, command)


async def status(broker: TestBroker, path: Path, *args: str, **env: str) -> tuple[int, Any, str]:
    """Run ``warren status`` as a user does: exit code, stdout (parsed with --json), stderr."""
    result = await asyncio.to_thread(
        run_warren, broker, "status", *args, CRON_SCHEDULES_FILE=str(path), **env
    )
    out = json_out(result) if "--json" in args and result.returncode == 0 else result.stdout
    return result.returncode, out, result.stderr


def outcome(monitor: Monitor, schedule: str) -> str | None:
    """The last outcome the monitor's fold holds for ``schedule``."""
    state = monitor.keeper.fold.schedules.get(schedule)
    return None if state is None else state.last_outcome


async def test_status_shows_succeeded_failed_retrying_and_paused_schedules(
    broker: TestBroker, run_worker: Any, run_monitor: Any, tmp_path: Path
) -> None:
    """One row per schedule of the file with the fields of each, as JSON and as a table."""
    path = tmp_path / "schedules.toml"
    entries = ("good:ok", "broken:bad", "shaky:flaky", "held:ok", "new:ok")
    schedules, p = schedules_file(broker, path, *entries)
    monitor = await run_monitor(schedules=schedules.schedules, monitor_interval_seconds=0.1)
    await run_worker(registry(**handlers()))
    await pause(broker, f"{p}held")
    for name, task in (("good", "ok"), ("broken", "bad"), ("shaky", "flaky"), ("held", "ok")):
        await run_of(broker, f"{p}{name}", task)
    await eventually(lambda: monitor.keeper.fold.counts().get(f"{p}shaky") == (1, 0))
    await eventually(lambda: outcome(monitor, f"{p}good") and outcome(monitor, f"{p}broken"))
    code, rows, err = await status(broker, path, "--json")
    assert code == 0 and err == ""
    row = {r["name"].removeprefix(p): r for r in rows}
    assert list(row) == ["good", "broken", "shaky", "held", "new"]
    good, broken, shaky, held, new = row.values()
    assert (good["last_outcome"], good["last_failure_at"], good["paused"]) == (
        "succeeded",
        None,
        False,
    )
    assert (
        good["last_success_at"] >= good["last_fire_at"]
        and good["next_fire_at"] > good["last_fire_at"]
    )
    assert (broken["last_outcome"], broken["last_success_at"]) == ("failed", None)
    assert broken["last_failure_at"] and broken["failed_records"] == 1
    assert (shaky["last_outcome"], shaky["retrying"], shaky["failed_records"]) == (None, 1, 0)
    assert (held["paused"], held["next_fire_at"], held["last_outcome"]) == (True, None, "succeeded")
    assert (new["last_fire_at"], new["last_outcome"], new["schedule"]) == (None, None, "every 1h")
    code, text, _ = await status(broker, path)
    first, header, *lines = text.splitlines()
    assert first.startswith("scheduler: DOWN: no scheduler leads (no standby; never seen)")
    assert header.split()[:4] == ["NAME", "SCHEDULE", "STATUS", "LAST"]
    assert [line.split()[0] for line in lines] == [f"{p}{name}" for name in row]
    assert "paused" in lines[3].split() and " ago" in lines[0]


async def test_the_fold_is_stored_and_a_restarted_monitor_goes_on_from_it(
    broker: TestBroker, run_worker: Any, run_monitor: Any, tmp_path: Path
) -> None:
    """The first monitor stores its fold; warren status uses it with the events after it; the
    next monitor starts after its offset and folds on."""
    path = tmp_path / "schedules.toml"
    schedules, p = schedules_file(broker, path, "job:ok", "other:bad")
    first = await run_monitor(schedules=schedules.schedules, monitor_interval_seconds=0.1)
    await run_worker(registry(**handlers()))
    await run_of(broker, f"{p}job", "ok")
    await eventually(lambda: outcome(first, f"{p}job") == "succeeded")
    first.stop()
    await eventually(lambda: not first.connected(), what="the first monitor stopped")
    stored = await read_fold(broker.connection, broker.names)
    assert stored is not None and stored.schedules[f"{p}job"].last_outcome == "succeeded"
    await run_of(broker, f"{p}other", "bad")  # while no monitor runs
    code, rows, err = await status(broker, path, "--json")
    assert code == 0 and "not running" not in err
    assert [r["last_outcome"] for r in rows] == ["succeeded", "failed"]
    with capture_logs() as logs:
        second = await run_monitor(schedules=schedules.schedules, monitor_interval_seconds=0.1)
    [started] = [line for line in logs if line["event"] == "following the history"]
    assert started["after_offset"] == stored.offset >= 0
    await eventually(lambda: outcome(second, f"{p}other") == "failed")
    assert second.keeper.fold.schedules[f"{p}job"] == stored.schedules[f"{p}job"]


async def test_without_a_monitor_status_folds_the_whole_stream_and_says_so(
    broker: TestBroker, run_worker: Any, tmp_path: Path
) -> None:
    """No stored fold: the rows are still right, and stderr names the missing monitor."""
    path = tmp_path / "schedules.toml"
    _, p = schedules_file(broker, path, "job:ok")
    worker = await run_worker(registry(**handlers()))
    await run_of(broker, f"{p}job", "ok")
    await worker.join()
    await eventually(lambda: worker.history.published >= 1, what="the attempt event sent")
    code, [row], err = await status(broker, path, "--json")
    assert code == 0 and row["last_outcome"] == "succeeded"
    assert "monitor" in err and "not running" in err


async def test_a_schedule_without_success_alerts_and_resolves_when_one_succeeds(
    broker: TestBroker, run_worker: Any, run_monitor: Any, tmp_path: Path
) -> None:
    """``expect_success_within`` passes with no success: an alert; a success: RESOLVED. A
    paused schedule is not expected to succeed and alerts nothing."""
    path = tmp_path / "schedules.toml"
    schedules, p = schedules_file(broker, path, "quiet:ok:2s", "held:ok:1s")
    await pause(broker, f"{p}held")
    with serve(Endpoint()) as endpoint:
        await run_monitor(
            schedules=schedules.schedules,
            alert_webhook_url=endpoint.url,
            monitor_interval_seconds=0.1,
        )
        key = f"no-success:{p}quiet"
        await eventually(lambda: conditions(endpoint, key) == ["firing"], 10)
        await run_worker(registry(**handlers()))
        await run_of(broker, f"{p}quiet", "ok")
        await eventually(lambda: conditions(endpoint, key)[:2] == ["firing", "resolved"], 10)
    texts = [body["text"] for body in bodies(endpoint)]
    assert f"ALERT: schedule {p}quiet has had no successful run within 2s" in texts[0]
    assert f"RESOLVED: schedule {p}quiet succeeded within 2s again" in texts[1]
    assert not conditions(endpoint, f"no-success:{p}held")


async def test_the_monitor_exports_each_schedules_last_success_failure_and_pause(
    broker: TestBroker, run_worker: Any, run_monitor: Any, tmp_path: Path
) -> None:
    """The gauges follow the fold: times of the last success and failure, 1 while paused."""
    path = tmp_path / "schedules.toml"
    schedules, p = schedules_file(broker, path, "good:ok", "broken:bad")
    monitor = await run_monitor(schedules=schedules.schedules, monitor_interval_seconds=0.1)
    await run_worker(registry(**handlers()))
    await pause(broker, f"{p}broken")
    await run_of(broker, f"{p}good", "ok")
    await run_of(broker, f"{p}broken", "bad")

    def gauge(name: str, schedule: str) -> float | None:
        return REGISTRY.get_sample_value(name, {"schedule": f"{p}{schedule}"})

    success = "cron_schedule_last_success_timestamp_seconds"
    failure = "cron_schedule_last_failure_timestamp_seconds"
    await eventually(lambda: gauge(success, "good") and gauge(failure, "broken"))
    fold = monitor.keeper.fold.schedules
    assert gauge(success, "good") == fold[f"{p}good"].last_success_at.timestamp()
    assert gauge(failure, "broken") == fold[f"{p}broken"].last_failure_at.timestamp()
    assert (gauge(success, "broken"), gauge(failure, "good")) == (None, None)
    assert (gauge("cron_schedule_paused", "broken"), gauge("cron_schedule_paused", "good")) == (
        1,
        0,
    )
    dropped = {"process": "monitor"}
    assert REGISTRY.get_sample_value("cron_history_events_dropped_total", dropped) == 0


async def test_status_exits_3_without_a_broker_and_2_for_a_bad_schedules_file(
    broker: TestBroker, tmp_path: Path
) -> None:
    """Broker trouble and a bad file each get their exit code and a message naming the fix."""
    path = tmp_path / "schedules.toml"
    schedules_file(broker, path, "job:ok")
    code, _, err = await status(broker, path, CRON_AMQP_URL="amqp://guest:guest@127.0.0.1:1/")
    assert code == 3 and "cannot reach RabbitMQ" in err
    path.write_text(path.read_text() + 'expect_success_within = "soon"\n')
    code, _, err = await status(broker, path)
    assert code == 2 and "expect_success_within" in err and "26h" in err


async def test_a_disabled_schedule_reads_disabled_with_no_next_fire(
    broker: TestBroker, tmp_path: Path
) -> None:
    """``enabled = false`` shows ``disabled`` and no next fire in status and schedules list."""
    path = tmp_path / "schedules.toml"
    text = '[[schedule]]\nname = "off"\nevery = "2s"\ntask = "ok"\nenabled = false\n'
    text += '[[schedule]]\nname = "on"\nevery = "2s"\ntask = "ok"\n'
    write_schedules(broker, path, text)
    code, rows, err = await status(broker, path, "--json")
    assert code == 0, err
    shown = {row["name"]: (row["status"], row["next_fire_at"]) for row in rows}
    assert shown["off"] == ("disabled", None) and shown["on"][0] == "active"
    listed = json_out(
        await asyncio.to_thread(
            run_warren, broker, "schedules", "list", "--json", CRON_SCHEDULES_FILE=str(path)
        )
    )
    rows = listed if isinstance(listed, list) else listed["schedules"]
    assert {(r["name"], r["status"], r["next_fire_at"]) for r in rows if r["name"] == "off"} == {
        ("off", "disabled", None)
    }
