"""Helpers for the failed-task tests: records put straight in the failed queue, scripts run."""

from __future__ import annotations

import os
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from tests import warm
from tests.helpers import envelope
from tests.namespace import TestBroker
from warren_cron.envelope import Envelope
from warren_cron.names import FAILED_KEY
from warren_cron.records import Failure, envelope_record

ROOT = Path(__file__).resolve().parent.parent


async def put_failed(
    broker: TestBroker,
    count: int = 1,
    *,
    task: str = "job",
    schedule: str | None = None,
    reason: str = "retries-exhausted",
    attempts: int = 4,
    failed_at: datetime | None = None,
) -> list[Envelope]:
    """Publish failure records as the worker does: to the DLX, so failed and monitor get one."""
    await broker.declare()
    channel = await broker.connection.channel(publisher_confirms=True)
    dlx = await channel.get_exchange(broker.names.dlx)
    envelopes = []
    for n in range(count):
        env = envelope(task, {"n": n}, schedule=schedule)
        failure = Failure(reason, f"RuntimeError: failure {n}", attempts)
        record = envelope_record(env, failure, failed_at)
        await dlx.publish(record, FAILED_KEY, mandatory=True)
        envelopes.append(env)
    await channel.close()
    return envelopes


async def ids_in(broker: TestBroker, queue: str) -> list[str]:
    """Message ids of a queue, head first; the queue keeps its messages."""
    return [m.message_id for m in await broker.get_all(queue)]


def script_env(broker: TestBroker, **extra: str) -> dict[str, str]:
    """Environment of a script working in the test's namespace."""
    # Output is captured, not a terminal: no width of the terminal the tests run in.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRON_")}
    env.pop("COLUMNS", None)
    env.update(
        CRON_NAMESPACE=broker.names.namespace,
        CRON_AMQP_URL=broker.url,
        CRON_QUEUE_TYPE=broker.queue_type,
    )
    env.update(extra)  # may name another broker
    return env


def run_warren(
    broker: TestBroker, command: str, *args: str, stdin: str = "", **extra: str
) -> subprocess.CompletedProcess[str]:
    """Run ``warren <command>`` to completion in the test's namespace (forked from a process
    that imported it once: ``tests/warm.py``)."""
    return warm.run([command, *args], env=script_env(broker, **extra), cwd=ROOT, stdin=stdin)


def json_out(result: subprocess.CompletedProcess[str]) -> Any:
    """The JSON a script printed, after checking it succeeded."""
    assert result.returncode == 0, result.stderr
    return orjson.loads(result.stdout)
