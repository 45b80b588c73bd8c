"""The kit's ``warren_broker`` fixture: a namespace of the test's own on a real broker, every
object in it deleted after the test."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import aio_pika
import pytest
from aiormq.exceptions import ChannelNotFoundEntity

from warren_cron.names import Names

pytestmark = pytest.mark.broker

INNER = """
from pathlib import Path

from warren_cron.client import Client
from warren_cron.worker.settings import WorkerSettings


async def test_enqueue_in_a_namespace_of_its_own(warren_broker: WorkerSettings) -> None:
    async with Client(warren_broker) as client:
        await client.enqueue("noop", {"n": 1})
    Path("namespace.txt").write_text(warren_broker.namespace)
"""


async def main_queue_exists(url: str, namespace: str) -> bool:
    """Whether the namespace's main queue is on the broker."""
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        await channel.declare_queue(Names(namespace).main_queue, passive=True)
    except ChannelNotFoundEntity:
        return False
    finally:
        await connection.close()
    return True


def test_the_fixture_namespace_is_deleted_after_the_test(tmp_path: Path, amqp_url: str) -> None:
    """A user's test enqueues in the fixture's namespace; once it ended, the namespace's main
    queue is gone from the broker."""
    (tmp_path / "test_inner.py").write_text(INNER)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "CRON_"))}
    env["CRON_AMQP_URL"] = amqp_url
    options = ["-o", "asyncio_mode=auto", "-o", "asyncio_default_fixture_loop_scope=function"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    namespace = (tmp_path / "namespace.txt").read_text()
    assert namespace.startswith("warren_test_")
    assert not asyncio.run(main_queue_exists(amqp_url, namespace))
