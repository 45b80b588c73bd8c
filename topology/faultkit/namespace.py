"""A namespace on a broker: the names, queue type and retry keys of one experiment."""

from __future__ import annotations

from aio_pika.abc import AbstractChannel, AbstractConnection

from warren_cron.declare import QueueType
from warren_cron.names import Names


class BrokerNamespace:
    """One namespace on the broker at ``url``, reached through ``connection``."""

    def __init__(self, url: str, namespace: str, connection: AbstractConnection) -> None:
        self.url = url
        self.names = Names(namespace)
        self.connection = connection
        self.queue_type: QueueType = "classic"
        #: Retry-plan keys declared in the namespace, so whoever cleans up finds their queues.
        self.plan_keys: set[str] = set()

    async def channel(self) -> AbstractChannel:
        """A fresh channel with publisher confirms."""
        return await self.connection.channel()
