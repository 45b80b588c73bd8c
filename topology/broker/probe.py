"""What a broker tells over AMQP alone, without changing anything: its product and version (the
connection's server properties), whether a queue would accept warren's declaration, and whether
an exchange type (a plugin's) is known.

A declaration with the very arguments a queue has is a no-op; with others, the broker refuses
it with PRECONDITION_FAILED naming the first argument that differs and both values. That is
what any warren process would meet, so it is asked only of queues that exist.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import aio_pika
from aio_pika.abc import AbstractConnection
from aiormq.exceptions import AMQPError, ChannelPreconditionFailed

from warren_cron.broker.connect import briefly
from warren_cron.broker.inspect import counts

#: The exchange type of the (archived) rabbitmq_delayed_message_exchange plugin.
DELAYED_TYPE = "x-delayed-message"
_NO_SUCH_TYPE = re.compile(r"(unknown|invalid) exchange type")
_INEQUIVALENT = re.compile(r"inequivalent arg '([^']+)'.*?: (received .*)$")


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """The broker as its connection introduces itself."""

    product: str
    version: str
    platform: str

    @property
    def series(self) -> tuple[int, int]:
        """Major and minor version, ``(4, 3)``; ``(0, 0)`` when unreadable."""
        found = re.match(r"(\d+)\.(\d+)", self.version)
        return (int(found[1]), int(found[2])) if found else (0, 0)


@dataclass(frozen=True, slots=True)
class QueueState:
    """A queue that exists: depth, consumers, and the argument a declaration would trip on."""

    name: str
    messages: int
    consumers: int
    mismatch: str | None = None  # the broker's words, e.g. "received 'classic' but current is..."
    argument: str | None = None  # the argument named, e.g. "x-queue-type"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


def server_info(connection: AbstractConnection) -> ServerInfo:
    """Product, version and platform from the server properties of an open connection."""
    props = connection.transport.connection.server_properties  # type: ignore[union-attr]
    return ServerInfo(
        _text(props.get("product")), _text(props.get("version")), _text(props.get("platform"))
    )


async def queue_state(
    connection: AbstractConnection, name: str, arguments: dict[str, Any]
) -> QueueState | None:
    """The state of queue ``name``, or None when it does not exist."""
    found = await counts(connection, name)
    if found is None:
        return None
    async with briefly(connection) as channel:
        try:
            await channel.declare_queue(name, durable=True, arguments=arguments)
        except ChannelPreconditionFailed as refused:
            said = _INEQUIVALENT.search(str(refused))
            detail = said[2] if said else str(refused)
            return QueueState(name, *found, detail, said[1] if said else None)
    return QueueState(name, *found)


@contextmanager
def quiet(*loggers: str) -> Iterator[None]:
    """Silence ``loggers`` meanwhile: a refusal asked for on purpose is no error to log."""
    saved = [(logging.getLogger(name), logging.getLogger(name).level) for name in loggers]
    for logger, _ in saved:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for logger, level in saved:
            logger.setLevel(level)


async def delayed_message_plugin(url: str) -> bool:
    """Whether the broker at ``url`` knows the delayed-message plugin's exchange type.

    Asked on a connection of its own: RabbitMQ 3.x closes the whole connection on an unknown
    type (4.x only the channel). A throwaway auto-delete exchange is made and removed at once;
    any refusal but "unknown exchange type" (never known) or "invalid exchange type" (known
    once: a plugin disabled on the running node, 4.x) means the plugin is there (if
    misbehaving).
    """
    with quiet("aiormq", "aio_pika"):
        connection = await aio_pika.connect(url, timeout=10)
        try:
            channel = await connection.channel()
            probe = f"warren.doctor.{uuid.uuid4().hex[:8]}"
            delayed: dict[str, Any] = {"x-delayed-type": "direct"}
            exchange = await channel.declare_exchange(
                probe, DELAYED_TYPE, auto_delete=True, arguments=delayed
            )
            await exchange.delete()
        except AMQPError as refused:
            return not _NO_SUCH_TYPE.search(str(refused))
        finally:
            with suppress(Exception):
                await connection.close()
    return True
