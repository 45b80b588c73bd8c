"""The lease queue of a long attempt: a copy of its task parked in the broker while it runs,
renewed by its worker, dead-lettered back to the main queue when the worker stops renewing
it (docs/long-jobs.md).

The queue ``<ns>_lease.<digest>`` is durable, holds each copy one lease
(``x-message-ttl``), and dead-letters an expired copy to the tasks exchange under the task's
plan. Renewing publishes a fresh copy with confirms, then takes the older ones out.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping
from typing import Any

from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractQueue
from aiormq.exceptions import ChannelNotFoundEntity

from warren_cron.broker.connect import briefly
from warren_cron.codec import persistent_message
from warren_cron.declare import queue_arguments
from warren_cron.envelope import Envelope
from warren_cron.headers import X_DEATH
from warren_cron.names import Names
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.settings import WorkerSettings

#: On a parked copy: the number of the copy (renewals count up), so a trim keeps the newest.
H_LEASE = "cron-lease"
#: On a parked or retried copy: the attempt number of the long attempt that sent it.
H_LONG_ATTEMPT = "cron-long-attempt"
#: On a parked copy: how many times its run was handed over (a worker died, or lost its claim).
H_HANDOVERS = "cron-handovers"
#: A lease queue outlives its last use by this many leases, then the broker deletes it.
EXPIRES_LEASES = 4


def digest(*parts: str) -> str:
    """A short digest naming a run's queues: a run id may be longer than a queue name."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


def claim_queue(names: Names, run_id: str) -> str:
    """The exclusive queue whose holder runs the run's attempt (the fence)."""
    return f"{names.namespace}_claim.{digest(run_id)}"


def lease_queue(names: Names, run_id: str, plan_key: str) -> str:
    """The queue a run's copy is parked in; the plan is part of its name, since the queue
    dead-letters under it."""
    return f"{names.namespace}_lease.{digest(run_id, plan_key)}"


def schedule_lease_queue(names: Names, schedule: str) -> str:
    """The queue a run of a ``Forbid`` schedule is parked in: one for the schedule, so that
    another run finds it while the run is handed over (and its lock free for a moment)."""
    return f"{names.namespace}_lease.schedule.{digest(schedule)}"


def lease_of(names: Names, envelope: Envelope, plan_key: str) -> str:
    """The lease queue of ``envelope``'s run."""
    if envelope.concurrency == "Forbid" and envelope.schedule is not None:
        return schedule_lease_queue(names, envelope.schedule)
    return lease_queue(names, envelope.run_id, plan_key)


async def parked_count(connection: AbstractConnection, name: str) -> int | None:
    """Copies parked in lease queue ``name``; None when there is no such queue."""
    async with briefly(connection) as channel:
        try:
            declared = await channel.declare_queue(name, passive=True)
        except ChannelNotFoundEntity:
            return None  # the broker closed this channel; the connection stays usable
    return declared.declaration_result.message_count or 0


def copy_headers(headers: Mapping[str, Any], attempt: int) -> dict[str, Any]:
    """The headers of a copy: the task's, without the death history a client cannot carry
    (RabbitMQ 4 ignores it), with the attempt number that history counted."""
    kept = {k: v for k, v in headers.items() if k not in (X_DEATH, H_LEASE)}
    kept[H_LONG_ATTEMPT] = attempt
    if H_LEASE in headers:  # a copy that came back: its run was handed over once more
        kept[H_HANDOVERS] = handovers(headers) + 1
    return kept


def handovers(headers: Mapping[str, Any]) -> int:
    """How many times the run of a delivery with ``headers`` was handed over before."""
    count = headers.get(H_HANDOVERS)
    return count if isinstance(count, int) else 0


class LeaseQueue:
    """A run's parked copy, on the channel of its claim's connection."""

    def __init__(
        self,
        channel: AbstractChannel,
        message: Delivery,
        attempt: int,
        name: str,
        settings: WorkerSettings,
    ) -> None:
        self._channel, self._message, self.name = channel, message, name
        self._tasks_exchange = Names(settings.namespace).tasks_exchange
        self._headers = copy_headers(message.headers, attempt)
        self._ttl_ms = int(settings.long_lease_seconds * 1000)
        self._queue_type = settings.queue_type
        self._numbers = itertools.count(1)
        self._queue: AbstractQueue | None = None

    async def park(self, stale: bool) -> None:
        """Declare the queue and park the first copy, confirmed; a ``stale`` queue (left
        empty by an attempt that died) is deleted first: it may dead-letter under another plan."""
        if stale:
            # Not ``if_empty``: quorum queues refuse it (closing the connection). Holding the
            # claim, no one else parks here; a copy parked by an attempt that lost its claim
            # unknowingly can go, this attempt parks the run's own.
            await self._channel.queue_delete(self.name)
        arguments = queue_arguments(
            self._queue_type,
            ttl_ms=self._ttl_ms,
            expires_ms=self._ttl_ms * EXPIRES_LEASES,
            dead_letter_exchange=self._tasks_exchange,
            dead_letter_key=self._message.routing_key,
        )
        self._queue = await self._channel.declare_queue(
            self.name, durable=True, arguments=arguments
        )
        await self._publish_copy()

    async def renew(self) -> None:
        """Park a fresh copy, then take out every older one."""
        newest = await self._publish_copy()
        assert self._queue is not None
        while (got := await self._queue.get(no_ack=False, fail=False)) is not None:
            if got.headers.get(H_LEASE) == newest:
                # The older ones expired already: the newest goes back and stays.
                await got.nack(requeue=True)
                return
            await got.ack()

    async def _publish_copy(self) -> int:
        number = next(self._numbers)
        copy = persistent_message(
            self._message.body, {**self._headers, H_LEASE: number}, self._message.properties
        )
        await self._channel.default_exchange.publish(copy, self.name, mandatory=True)
        return number

    async def retry(self, dlx: str) -> None:
        """Send the task to its next retry as the broker's NACK would (through the dead-letter
        exchange under its plan), confirmed."""
        copy = persistent_message(self._message.body, self._headers, self._message.properties)
        exchange = await self._channel.get_exchange(dlx, ensure=False)
        await exchange.publish(copy, self._message.routing_key, mandatory=True)

    async def remove(self) -> None:
        """Delete the queue with its copies: the run's fate is settled."""
        await self._channel.queue_delete(self.name)
