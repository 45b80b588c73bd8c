"""The processes as operators run them: exit codes, signals, and the enqueue script."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TestBroker, plan
from tests.helpers import envelope, publish
from tests.scheduling import env_for

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.broker


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a project command to completion."""
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


async def test_worker_with_a_bad_setting_exits_2_naming_it(broker: TestBroker) -> None:
    """A bad variable stops the worker at start with exit code 2 and the variable's name."""
    result = run(["-m", "worker"], env_for(broker, CRON_RETRY_DELAY_MULTIPLIER="0.5"))
    assert result.returncode == 2
    assert "CRON_RETRY_DELAY_MULTIPLIER" in result.stderr


async def test_worker_with_a_missing_handler_module_exits_2(broker: TestBroker) -> None:
    """A module in CRON_HANDLER_MODULES that does not import is named in the error."""
    result = run(["-m", "worker"], env_for(broker, CRON_HANDLER_MODULES="no.such.module"))
    assert result.returncode == 2 and "no.such.module" in result.stderr


async def test_sigterm_mid_task_exits_0_and_spends_no_retry(broker: TestBroker) -> None:
    """SIGTERM while a task runs: exit 0, the task back in the main queue, no x-death."""
    await publish(broker, envelope("sleepy", {"seconds": 30}), plan(60_000))
    env = env_for(
        broker, CRON_HANDLER_MODULES="tests.sample_handlers", CRON_SHUTDOWN_GRACE_SECONDS="0.5"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "worker", cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    async with asyncio.timeout(20):
        while b"sleepy started" not in await proc.stdout.readline():
            pass
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 15) == 0
    [message] = await broker.get_all(broker.names.main_queue)
    assert message.redelivered and "x-death" not in (message.headers or {})


async def test_enqueue_prints_the_run_id_of_a_confirmed_task(broker: TestBroker) -> None:
    """The script publishes with the plan from its options and prints the run id."""
    broker.plan_keys.update({"100ms-200ms", "200ms"})
    result = run(
        [
            "scripts/enqueue.py",
            "noop",
            "--payload",
            '{"a": 1}',
            "--max-retries",
            "2",
            "--delay-ms",
            "100",
        ],
        env_for(broker),
    )
    assert result.returncode == 0, result.stderr
    run_id = result.stdout.strip()
    [message] = await broker.get_all(broker.names.main_queue)
    assert message.message_id == run_id and message.routing_key == "100ms-200ms"
    assert message.headers["cron-run-id"] == run_id


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["noop", "--payload", "{bad"], "not valid JSON"),
        (["noop", "--frobnicate"], "unrecognized"),
        (["noop", "--multiplier", "0.1"], "--multiplier"),
        ([], "required: task"),
    ],
)
def test_enqueue_usage_errors_exit_2(args: list[str], why: str, tmp_path: Any) -> None:
    """Bad JSON or an unknown option is a clear error and exit code 2."""
    result = run(["scripts/enqueue.py", *args], {**os.environ, "CRON_NAMESPACE": "unused"})
    assert result.returncode == 2 and why in result.stderr
