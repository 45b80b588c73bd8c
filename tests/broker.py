"""Finding a broker for the tests, and deleting what a test declared on it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from urllib.parse import urlsplit

from aio_pika.abc import AbstractConnection
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

    ``url`` may list a cluster's nodes: the first answering one is used. A connection the
    broker closes under a delete (4.3 closed one with INTERNAL_ERROR after a fault test) is
    opened again for the rest: left behind, a namespace's streams kept the node's vhost from
    coming back after the next test's restart.
    """
    settings = CronSettings(amqp_url=url)
    connection = await plain_connection(settings, "test-cleanup", 10)
    try:
        for kind, name in [*(("queue", q) for q in queues), *(("exchange", e) for e in exchanges)]:
            for _ in range(3):  # a delete that closes the connection every time is given up
                if connection.is_closed:
                    connection = await plain_connection(settings, "test-cleanup", 10)
                if await _deleted(connection, kind, name):
                    break
    finally:
        with suppress(Exception):
            await connection.close()


async def _deleted(connection: AbstractConnection, kind: str, name: str) -> bool:
    """Delete one queue or exchange; False when the connection closed under the delete."""
    with suppress(Exception):
        channel = await connection.channel()
        with suppress(Exception):
            if kind == "queue":
                await channel.queue_delete(name)
            else:
                await channel.exchange_delete(name)
        with suppress(Exception):
            await channel.close()
    return not connection.is_closed
