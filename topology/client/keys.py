"""Idempotency keys, with nothing but the broker: a one-message queue per key.

A key's queue is declared with ``x-max-length = 1`` and ``reject-publish`` overflow, and the
enqueue publishes a marker into it with confirms before the task: the broker confirms the
first marker and refuses (nacks) every later one, atomically, whichever client sends it. So of
all the enqueues with one key, exactly one sends its task; the others learn it from the nack.

Where the guarantee ends:

- A key is remembered while its queue lives: ``x-expires`` deletes it after ``KEY_RETENTION``
  without use (every enqueue with the key declares it again, which counts as use).
- The marker is published before the task. When the task's publish fails the marker is
  removed, so the caller may try again; a process killed between the two leaves the key
  taken and no task sent (that window is one publish confirm long). A call cancelled once
  the task's publish began keeps the key too: the task may reach the broker still.
- Markers live in classic queues whatever ``CRON_QUEUE_TYPE`` says: a quorum queue per key
  would be a Raft group per key. A classic durable queue with a persistent marker survives a
  broker restart, not the loss of its node's disk.
"""

from __future__ import annotations

import hashlib
from contextlib import suppress

import aio_pika
from aio_pika.abc import AbstractChannel
from aiormq.exceptions import DeliveryError

from warren_cron.declare import durable_queue, queue_arguments
from warren_cron.names import Names

#: How long a key is remembered after its last use, in milliseconds (one week).
KEY_RETENTION_MS = 7 * 24 * 3600 * 1000


def key_digest(key: str) -> str:
    """A fixed-length name part for any key: queue names are limited to 255 bytes."""
    return hashlib.sha256(key.encode()).hexdigest()[:40]


def key_arguments() -> dict[str, object]:
    """Arguments of a key's queue: one message, later ones refused, deleted when unused."""
    return queue_arguments(
        "classic", max_length=1, reject_overflow=True, expires_ms=KEY_RETENTION_MS
    )


class KeyClaims:
    """Claims idempotency keys on a channel with publisher confirms."""

    def __init__(self, channel: AbstractChannel, names: Names) -> None:
        self._channel = channel
        self._names = names

    async def claim(self, key: str, run_id: str) -> bool:
        """True when this call is the first with ``key``; False when the key was used."""
        name = self._names.key_queue(key_digest(key))
        await durable_queue(self._channel, name, key_arguments())
        marker = aio_pika.Message(
            run_id.encode(), message_id=run_id, delivery_mode=aio_pika.DeliveryMode.PERSISTENT
        )
        try:
            await self._channel.default_exchange.publish(marker, name, mandatory=True)
        except DeliveryError:
            return False
        return True

    async def release(self, key: str) -> None:
        """Forget ``key`` after its task could not be sent, so that a retry can send it."""
        with suppress(Exception):
            await self._channel.queue_delete(self._names.key_queue(key_digest(key)))
