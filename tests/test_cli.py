"""The processes as operators run them: exit codes, signals, and the enqueue script."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aio_pika.exceptions import ChannelNotFoundEntity

from tests.conftest import plan
from tests.helpers import Recorder, envelope, publish, registry
from tests.namespace import TestBroker
from tests.scheduling import env_for
from warren_cron.faultkit.processes import WARREN

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.broker


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a project command to completion."""
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


async def test_worker_with_a_bad_setting_exits_2_naming_it(broker: TestBroker) -> None:
    """A bad variable stops the worker at start with exit code 2 and the variable's name."""
    result = run(["-m", "warren_cron.worker"], env_for(broker, CRON_RETRY_DELAY_MULTIPLIER="0.5"))
    assert result.returncode == 2
    assert "CRON_RETRY_DELAY_MULTIPLIER" in result.stderr


async def test_worker_with_a_missing_handler_module_exits_2(broker: TestBroker) -> None:
    """A module in CRON_HANDLER_MODULES that does not import is named in the error."""
    env = env_for(broker, CRON_HANDLER_MODULES="no.such.module")
    result = run(["-m", "warren_cron.worker"], env)
    assert result.returncode == 2 and "no.such.module" in result.stderr


async def test_sigterm_mid_task_exits_0_and_spends_no_retry(broker: TestBroker) -> None:
    """SIGTERM while a task runs: exit 0, the task back in the main queue, no x-death."""
    await publish(broker, envelope("sleepy", {"seconds": 30}), plan(60_000))
    env = env_for(
        broker, CRON_HANDLER_MODULES="tests.sample_handlers", CRON_SHUTDOWN_GRACE_SECONDS="0.5"
    )
    proc = await asyncio.create_subprocess_exec(
        WARREN, "worker", cwd=ROOT, env=env, stdout=asyncio.subprocess.PIPE
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
            WARREN,
            "enqueue",
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


async def test_enqueue_with_a_delay_runs_the_task_that_much_later(
    broker: TestBroker, run_worker: Any
) -> None:
    """``--delay 5s`` prints a run id at once; the task starts 5 s later, within a second."""
    recorder = Recorder()
    await run_worker(registry(noop=recorder))
    broker.plan_keys.update(step.key for step in broker.settings().default_plan().suffixes())
    before = time.monotonic()
    result = await asyncio.to_thread(
        run, [WARREN, "enqueue", "noop", "--delay", "5s"], env_for(broker)
    )
    after = time.monotonic()
    assert result.returncode == 0, result.stderr
    await recorder.wait_calls(1, timeout=15)
    [(started, ctx)] = recorder.calls
    assert ctx.run_id == result.stdout.strip() and ctx.attempt == 1
    assert before + 5 <= started < after + 5 + 1


async def test_enqueue_at_a_time_in_the_past_runs_now(broker: TestBroker) -> None:
    """``--at`` before now publishes straight to the workers, with its plan as routing key."""
    default = broker.settings().default_plan()
    broker.plan_keys.update(step.key for step in default.suffixes())
    args = [WARREN, "enqueue", "noop", "--at", "2020-01-01T00:00:00Z"]
    result = await asyncio.to_thread(run, args, env_for(broker))
    assert result.returncode == 0, result.stderr
    [message] = await broker.get_all(broker.names.main_queue)
    assert (message.message_id, message.routing_key) == (result.stdout.strip(), default.key)


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["noop", "--payload", "{bad"], "not valid JSON"),
        (["noop", "--frobnicate"], "unrecognized"),
        (["noop", "--multiplier", "0.1"], "--multiplier"),
        (["noop", "--delay", "soon"], "no duration like 90s"),
        (["noop", "--at", "2030-01-01T09:00"], "has no time zone"),
        (["noop", "--delay", "5s", "--at", "2030-01-01T09:00Z"], "not allowed with"),
        (["noop", "--delay", "1m", "--ttl", "30s"], "before it is due"),
        ([], "required: task"),
    ],
)
def test_enqueue_usage_errors_exit_2(args: list[str], why: str, tmp_path: Any) -> None:
    """Bad JSON or an unknown option is a clear error and exit code 2."""
    result = run([WARREN, "enqueue", *args], {**os.environ, "CRON_NAMESPACE": "unused"})
    assert result.returncode == 2 and why in result.stderr


async def test_an_enqueue_refused_for_its_options_leaves_nothing_on_the_broker(
    broker: TestBroker,
) -> None:
    """Options refused after parsing (a ttl that ends before the delay) declare no queue."""
    env = {**os.environ, "CRON_NAMESPACE": broker.names.namespace, "CRON_AMQP_URL": broker.url}
    args = [WARREN, "enqueue", "noop", "--delay", "1m", "--ttl", "30s"]
    result = await asyncio.to_thread(run, args, env)
    assert result.returncode == 2 and "before it is due" in result.stderr
    with pytest.raises(ChannelNotFoundEntity):
        await broker.depth(broker.names.main_queue)
