"""``warren scheduler`` as operators run it: --check, several at once, a killed leader."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.namespace import TestBroker
from tests.pausing import schedules_script
from tests.scheduling import ROOT, Spawner, env_for, fire_times, write_schedules
from warren_cron.faultkit.waits import eventually
from warren_cron.scheduler.__main__ import NO_FILE

pytestmark = pytest.mark.broker
SECOND = timedelta(seconds=1)

CHECKED = """
[[schedule]]
name = "lunch-report"
cron = "0 12 * * *"
timezone = "Europe/Berlin"
task = "noop"
timeout_seconds = 60
retry = { max_retries = 2, delay_ms = 1000 }
"""


def check(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``warren scheduler --check`` on a file."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CRON_")}
    environ.update(CRON_SCHEDULES_FILE=str(path), **env)
    return subprocess.run(
        [sys.executable, "-m", "warren_cron.scheduler", "--check"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_prints_next_fires_and_retry_timeline_and_exits_0(tmp_path: Path) -> None:
    """Five next fires in UTC with their local time, the attempts, and the worst case."""
    path = tmp_path / "schedules.toml"
    path.write_text(CHECKED)
    result = check(path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{path}: 1 schedule(s), valid"
    nexts = [line for line in lines if line.startswith("  next: ")]
    assert len(nexts) == 5 and all(" 12:00 CE" in line for line in nexts), nexts
    assert "  retries: plan 1s-2s: attempts at #1 +0s, #2 +1s, #3 +3s" in lines
    assert "  worst case: 3s of delays + 3 x 1m timeout = 3m3s" in lines


def test_check_of_a_broken_file_names_each_problem_and_exits_2(tmp_path: Path) -> None:
    """Each problem on stderr names the schedule and the field; nothing on stdout."""
    path = tmp_path / "schedules.toml"
    path.write_text(CHECKED.replace("0 12 * * *", "0 25 * * *") + '\n[[schedule]]\nname = "x"\n')
    result = check(path)
    assert result.returncode == 2 and result.stdout == ""
    assert "schedule 'lunch-report' (#1): cron: '0 25 * * *' is not a valid" in result.stderr
    assert "schedule 'x' (#2): task: Field required" in result.stderr


def test_a_missing_file_or_a_bad_setting_exits_2_naming_it(tmp_path: Path) -> None:
    """The message says which variable to fix."""
    missing = check(tmp_path / "absent.toml")
    assert missing.returncode == 2 and "CRON_SCHEDULES_FILE" in missing.stderr
    path = tmp_path / "schedules.toml"
    path.write_text(CHECKED)
    bad = check(path, CRON_LEADER_RETRY_SECONDS="0")
    assert bad.returncode == 2 and "CRON_LEADER_RETRY_SECONDS" in bad.stderr


def scheduler_env(broker: TestBroker, path: Path) -> dict[str, str]:
    """Environment of a scheduler process with quick failover."""
    return env_for(
        broker,
        CRON_SCHEDULES_FILE=str(path),
        CRON_LEADER_RETRY_SECONDS="0.2",
        CRON_SCHEDULER_HEARTBEAT_SECONDS="2",
        CRON_SCHEDULES_POLL_SECONDS="0",
    )


TICK = '[[schedule]]\nname = "tick"\nevery = "1s"\ntask = "noop"\ncatch_up = "all"\n'


def contiguous(times: list[datetime]) -> list[datetime]:
    """Every second from the first fire to the last."""
    return [times[0] + n * SECOND for n in range(int((times[-1] - times[0]) / SECOND) + 1)]


async def test_two_schedulers_at_once_publish_each_fire_exactly_once(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """One leads, one stands by: every second fires once, none twice, none lost."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, TICK)
    env = scheduler_env(broker, path)
    first, second = [await spawn(["-m", "warren_cron.scheduler"], env) for _ in range(2)]
    await first.wait_event("scheduler started")
    await second.wait_event("scheduler started")
    await eventually(
        lambda: len(first.named("fire published") + second.named("fire published")) >= 4, 15
    )
    [leader] = [p for p in (first, second) if p.named("leading")]
    [standby] = [p for p in (first, second) if p is not leader]
    assert standby.named("standing by: another scheduler leads")
    assert standby.named("fire published") == []
    assert [await standby.stop(), await leader.stop()] == [0, 0]  # standby first: no handover
    times = await fire_times(broker)
    assert times == contiguous(times)


async def test_killing_the_leader_hands_over_within_seconds_without_losing_a_fire(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """SIGKILL the leader: the standby leads within seconds and catches up what was due."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, TICK)
    env = scheduler_env(broker, path)
    leader = await spawn(["-m", "warren_cron.scheduler"], env)
    await leader.wait_event("fire published", 2)
    standby = await spawn(["-m", "warren_cron.scheduler"], env)
    await standby.wait_event("standing by: another scheduler leads")
    await leader.kill()
    killed_at = time.monotonic()
    await standby.wait_event("leading", timeout=10)
    handover = time.monotonic() - killed_at
    await standby.wait_event("fire published", 2)
    assert await standby.stop() == 0
    times = await fire_times(broker)
    assert handover < 5.0
    assert sorted(set(times)) == contiguous(times)
    # A kill between a fire's confirm and the watermark write can repeat that one fire
    # (at least once, never lost); its run id lets handlers drop the repeat.
    assert sum(n - 1 for n in Counter(times).values()) <= 1


async def test_sighup_reloads_the_schedules_file(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """With polling off, SIGHUP alone makes a new schedule fire."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, TICK)
    process = await spawn(["-m", "warren_cron.scheduler"], scheduler_env(broker, path))
    await process.wait_event("fire published")
    write_schedules(broker, path, TICK.replace('"tick"', '"tock"'))
    process.proc.send_signal(signal.SIGHUP)
    await process.wait_event("schedules reloaded")
    await eventually(lambda: fire_times(broker, "tock"), 10)
    assert await process.stop() == 0


async def test_every_process_declares_quorum_queues_with_the_delivery_limit_it_was_given(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """Scheduler first, then worker and monitor, all with CRON_DELIVERY_LIMIT=5: all run."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, TICK)
    env = scheduler_env(broker, path) | {"CRON_QUEUE_TYPE": "quorum", "CRON_DELIVERY_LIMIT": "5"}
    scheduler = await spawn(["-m", "warren_cron.scheduler"], env)
    await scheduler.wait_event("fire published")
    worker = await spawn(["-m", "warren_cron.worker"], env)
    monitor = await spawn(["-m", "warren_cron.monitor"], env)
    await monitor.wait_event("monitor started")
    await worker.wait_event("attempt", 2)
    assert [await p.stop() for p in (scheduler, worker, monitor)] == [0, 0, 0]


async def test_without_a_schedules_file_the_scheduler_runs_the_runtime_schedules(
    broker: TestBroker, spawn: Spawner, tmp_path: Path
) -> None:
    """No file at CRON_SCHEDULES_FILE: the scheduler says so, leads, and fires a runtime
    schedule the command creates; SIGHUP reloads nothing until the file is there, then its
    schedules fire too; a file that exists but is invalid is still refused at start."""
    absent = tmp_path / "absent.toml"
    process = await spawn(["-m", "warren_cron.scheduler"], scheduler_env(broker, absent))
    await process.wait_event(NO_FILE)
    assert process.named(NO_FILE)[0]["file"] == str(absent)
    spec = '{"name": "rt", "every": "1s", "task": "noop"}'
    made = await schedules_script(broker, absent, "create", stdin=spec)
    assert made.returncode == 0, made.stderr
    await eventually(lambda: fire_times(broker, "rt"), 15, what="a fire of rt")
    process.proc.send_signal(signal.SIGHUP)
    await process.wait_event("schedules not reloaded: still no schedules file")
    write_schedules(broker, absent, TICK)
    process.proc.send_signal(signal.SIGHUP)
    await process.wait_event("schedules reloaded")
    await eventually(lambda: fire_times(broker, "tick"), 15, what="a fire of the file's tick")
    assert await process.stop() == 0
    absent.write_text('[[schedule]]\nname = "x"\n')
    refused = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "warren_cron.scheduler"],
        cwd=ROOT,
        env=scheduler_env(broker, absent),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "task: Field required" in refused.stderr
