"""Connections: robust, named, with heartbeats; passwords never reach a log line."""

from __future__ import annotations

import aio_pika
from aio_pika.abc import AbstractRobustChannel, AbstractRobustConnection

from topology.errors import CONNECTION_ERRORS, BrokerUnavailable
from topology.runtime.settings import CronSettings


async def connect(settings: CronSettings, name: str) -> AbstractRobustConnection:
    """Open a robust connection named ``name`` (as shown by ``rabbitmqctl list_connections``)."""
    try:
        return await aio_pika.connect_robust(
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


async def publish_channel(connection: AbstractRobustConnection) -> AbstractRobustChannel:
    """A channel with publisher confirms where a returned (unroutable) message raises."""
    channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    return channel
