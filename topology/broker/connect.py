"""Connections: robust, named, with heartbeats, to one node or the first answering node of a
cluster; passwords never reach a log line.

``CRON_AMQP_URL`` may list several nodes. A connection opens to the first that answers; a
robust connection that loses its node, or fails a reconnect try, moves to the next one, so a
dead node costs one reconnect interval, never a wait for that node to come back. aio-pika's
``connect_robust`` takes one URL (aio-pika#141): ``NodeListConnection`` swaps the URL it
reconnects to from its close callback, which aio-pika calls both for a lost connection and
for a failed try.

Each outage of a connection is logged once when it is lost and once when it is back
(``topology/broker/outage.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar, overload

import aio_pika
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractRobustChannel,
    AbstractRobustConnection,
)
from yarl import URL

from warren_cron.broker.outage import watch_outages
from warren_cron.errors import CONNECTION_ERRORS, BrokerUnavailable, being_cancelled
from warren_cron.runtime.settings import CronSettings

C = TypeVar("C", bound=AbstractConnection)


class NodeListConnection(aio_pika.RobustConnection):
    """A robust connection that reconnects to the next node of ``urls`` each time."""

    urls: Sequence[str] = ()

    def __init__(self, url: URL, *args: Any, **kwargs: Any) -> None:
        super().__init__(url, *args, **kwargs)
        self._at = 0
        # connect_robust adds its keyword options to the first URL's query: keep them for all.
        own = URL(self.urls[0]).query if self.urls else {}
        self._options = {k: v for k, v in self.url.query.items() if k not in own}

    async def _on_connection_close(self, closing: asyncio.Future[Any]) -> None:
        if len(self.urls) > 1:
            self._at = (self._at + 1) % len(self.urls)
            self.url = URL(self.urls[self._at]).update_query(self._options)
        await super()._on_connection_close(closing)


def node_list(order: Sequence[str]) -> type[NodeListConnection]:
    """The connection class of a robust connection to the nodes ``order``, first one first."""
    return type("NodeListConnection", (NodeListConnection,), {"urls": tuple(order)})


def in_turn(urls: Sequence[str], first: int) -> list[str]:
    """``urls`` starting at index ``first``, wrapping around."""
    return [*urls[first:], *urls[:first]]


async def first_answering(
    settings: CronSettings, open_one: Callable[[str, list[str]], Awaitable[C]]
) -> C:
    """``open_one(url, order)`` for each node in turn; the first connection made wins."""
    errors = []
    for first, url in enumerate(settings.urls):
        try:
            return await open_one(url, in_turn(settings.urls, first))
        except CONNECTION_ERRORS as error:
            errors.append(f"{type(error).__name__}: {error}")
    raise BrokerUnavailable(
        f"cannot reach RabbitMQ at {settings.safe_url} ({'; '.join(errors)}); "
        "start a broker (docker compose up -d rabbitmq) or set CRON_AMQP_URL"
    )


async def connect(
    settings: CronSettings, name: str, *, log_outages: bool = True
) -> AbstractRobustConnection:
    """Open a robust connection named ``name`` (as shown by ``rabbitmqctl list_connections``).

    ``log_outages=False`` for a caller that reports losing the broker itself.
    """

    async def open_one(url: str, order: list[str]) -> AbstractRobustConnection:
        return await aio_pika.connect_robust(
            url,
            client_properties={"connection_name": name},
            heartbeat=settings.heartbeat_seconds,
            reconnect_interval=1,
            timeout=10,
            connection_class=node_list(order),
        )

    connection = await first_answering(settings, open_one)
    if log_outages:
        watch_outages(connection, name)
    return connection


@overload
async def publish_channel(connection: AbstractRobustConnection) -> AbstractRobustChannel: ...
@overload
async def publish_channel(connection: AbstractConnection) -> AbstractChannel: ...
async def publish_channel(connection: AbstractConnection) -> AbstractChannel:
    """A channel with publisher confirms where a returned (unroutable) message raises."""
    return await open_channel(connection, publisher_confirms=True, on_return_raises=True)


async def owned_publish_channel(connection: AbstractConnection) -> AbstractChannel:
    """A ``publish_channel`` that a robust connection never reopens, for an owner that opens a
    new one whenever it finds it closed: a robust channel the broker closes under a failed
    write reopens itself, and came back unowned beside its owner's new one (the history
    publisher held two channels after an outage, 4.3 in CI)."""
    return await _opened(lambda: _plain_channel(connection))


@overload
async def open_channel(
    connection: AbstractRobustConnection, **options: bool
) -> AbstractRobustChannel: ...
@overload
async def open_channel(connection: AbstractConnection, **options: bool) -> AbstractChannel: ...
async def open_channel(connection: AbstractConnection, **options: bool) -> AbstractChannel:
    """A new channel; ``BrokerUnavailable`` while a robust connection is reconnecting."""
    return await _opened(lambda: connection.channel(**options))


async def _opened(make: Callable[[], AbstractChannel]) -> AbstractChannel:
    """Open the channel ``make()`` returns; closed again when its open fails."""
    channel = None
    try:
        channel = make()
        await channel
    except BaseException as error:
        # A robust connection reopens every channel it made after a reconnect: one whose
        # open failed during an outage would come back with no owner, a channel leaked
        # for each unlucky outage. Closed, it stays closed.
        if channel is not None:
            drop(channel)
        if isinstance(error, RuntimeError):
            # aio-pika's plain RuntimeError for a connection with no transport (down and
            # reconnecting): callers catch broker trouble, not every RuntimeError.
            raise BrokerUnavailable(f"the broker connection is down ({error}); try again") from None
        raise
    return channel


def _plain_channel(connection: AbstractConnection) -> AbstractChannel:
    """A confirming channel the connection does not know of: a robust one never reopens it."""
    if connection.transport is None:
        raise RuntimeError("Connection was not opened")  # as aio-pika's own channel() says
    return aio_pika.Channel(connection, publisher_confirms=True, on_return_raises=True)


@asynccontextmanager
async def briefly(connection: AbstractConnection) -> AsyncIterator[AbstractChannel]:
    """A channel for a call or two, closed after whatever happens (never reopened)."""
    channel = await open_channel(connection)
    try:
        yield channel
    except BaseException:
        drop(channel)
        raise
    await close_quietly(channel)


async def close_quietly(channel: AbstractChannel) -> None:
    """Close a channel that the broker may already have closed. A cancel that lands in the
    close stays a cancel, whatever aiormq turns it into: swallowed, it left a scheduler's
    spreading task running after its session ended, and the session waited on it for ever."""
    try:
        await channel.close()
    except Exception as error:
        if being_cancelled():
            raise asyncio.CancelledError from error


#: Closes under way that nobody waits for (a task the loop holds only weakly).
_DROPPING: set[asyncio.Task[None]] = set()


def drop(channel: AbstractChannel) -> None:
    """Close ``channel`` without waiting for it: after a failure or a timeout the node may not
    answer a close either (frozen, cut off), and a caller bounded in time must not wait on it.
    A robust channel is marked closed on the loop's next turn, before any reconnect could
    reopen it."""
    task = asyncio.get_running_loop().create_task(close_quietly(channel))
    _DROPPING.add(task)
    task.add_done_callback(_DROPPING.discard)


def is_gone(connection: AbstractConnection) -> bool:
    """True once ``connection`` is closed or closing, whoever closed it: aiormq can fail a
    call with a plain ``RuntimeError`` or ``Exception`` before aio-pika marks it closed."""
    transport = connection.transport
    return (
        connection.is_closed
        or connection.close_called
        or transport is None
        or transport.connection.is_closed
    )
