"""Finding a broker for the tests, and deleting what a test declared on it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from urllib.parse import urlsplit

from aiormq.exceptions import ChannelNotFoundEntity

from warren_cron.broker.exclusive import plain_connection
from warren_cron.runtime.settings import CronSettings

LOCAL_URL = "amqp://guest:guest@127.0.0.1:5672/"


def reachable(url: str) -> bool:
    """True when something accepts TCP connections at the URL's host and port."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "localhost", parts.port or 5672), 2):
            return True
    except OSError:
        return False


@contextmanager
def container_url() -> Iterator[str | None]:
    """A throwaway RabbitMQ from testcontainers, where a Docker engine runs."""
    try:
        from testcontainers.rabbitmq import RabbitMqContainer

        container = RabbitMqContainer("rabbitmq:4-management")
        container.start()
    except Exception:
        yield None
        return
    try:
        params = container.get_connection_params()
        yield f"amqp://guest:guest@{params.host}:{params.port}/"
    finally:
        container.stop()


def local_names(prefix: str, kind: str) -> list[str] | None:
    """Names of queues or exchanges starting with ``prefix``, from rabbitmqctl if present."""
    ctl = shutil.which("rabbitmqctl")
    if ctl is None or os.environ.get("CRON_TEST_AMQP_URL"):
        return None
    result = subprocess.run(
        [ctl, "-q", f"list_{kind}", "name"], capture_output=True, text=True, timeout=60
    )
    if result.returncode != 0:
        return None
    return [line for line in result.stdout.split("\n") if line.startswith(prefix)]


async def exchange_exists(url: str, name: str) -> bool:
    """True when exchange ``name`` exists; ``url`` may list a cluster's nodes."""
    connection = await plain_connection(CronSettings(amqp_url=url), "test-cleanup", 10)
    async with connection:
        channel = await connection.channel()
        try:
            await channel.declare_exchange(name, passive=True)
        except ChannelNotFoundEntity:
            return False
        return True


async def delete_all(url: str, queues: list[str], exchanges: list[str]) -> None:
    """Delete queues and exchanges, ignoring those that are already gone.

    ``url`` may list a cluster's nodes: the first answering one is used.
    """
    connection = await plain_connection(CronSettings(amqp_url=url), "test-cleanup", 10)
    async with connection:
        for name in queues:
            channel = await connection.channel()
            with suppress(Exception):
                await channel.queue_delete(name)
            with suppress(Exception):
                await channel.close()
        for name in exchanges:
            channel = await connection.channel()
            with suppress(Exception):
                await channel.exchange_delete(name)
            with suppress(Exception):
                await channel.close()
