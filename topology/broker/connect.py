"""Connections: robust, named, with heartbeats; passwords never reach a log line.

Each outage of a connection is logged once when it is lost and once when it is back
(``topology/broker/outage.py``).
"""

from __future__ import annotations

from typing import overload

import aio_pika
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractRobustChannel,
    AbstractRobustConnection,
)

from topology.broker.outage import watch_outages
from topology.errors import CONNECTION_ERRORS, BrokerUnavailable
from topology.runtime.settings import CronSettings


async def connect(
    settings: CronSettings, name: str, *, log_outages: bool = True
) -> AbstractRobustConnection:
    """Open a robust connection named ``name`` (as shown by ``rabbitmqctl list_connections``).

    ``log_outages=False`` for a caller that reports losing the broker itself.
    """
    try:
        connection = await aio_pika.connect_robust(
            settings.url,
            client_properties={"connection_name": name},
            heartbeat=settings.heartbeat_seconds,
            reconnect_interval=1,
            timeout=10,
        )
    except CONNECTION_ERRORS as error:
        raise BrokerUnavailable(
            f"cannot reach RabbitMQ at {settings.safe_url} ({type(error).__name__}: {error}); "
            "start a broker (docker compose up -d rabbitmq) or set CRON_AMQP_URL"
        ) from None
    if log_outages:
        watch_outages(connection, name)
    return connection


@overload
async def publish_channel(connection: AbstractRobustConnection) -> AbstractRobustChannel: ...
@overload
async def publish_channel(connection: AbstractConnection) -> AbstractChannel: ...
async def publish_channel(connection: AbstractConnection) -> AbstractChannel:
    """A channel with publisher confirms where a returned (unroutable) message raises."""
    channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    return channel
