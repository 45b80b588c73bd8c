"""Ending a consumer for good, even when the task ending it is cancelled meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any

from aio_pika.abc import AbstractQueue, ConsumerTag

#: How long an end waits for the broker to drop its consumer once its task is cancelled.
CANCEL_SECONDS = 10.0


async def end_consumer(queue: AbstractQueue, tag: ConsumerTag) -> None:
    """Cancel the consumer ``tag`` and wait for the broker's answer, also when this task is
    cancelled meanwhile (the cancel is raised once the broker answered, or after
    ``CANCEL_SECONDS``): a cancel cut half-way, its channel closed next, leaves a stream's
    consumer counted on RabbitMQ 3.10 for good, as a read whose client left mid-cancel did."""
    ending = asyncio.ensure_future(queue.cancel(tag))
    try:
        await asyncio.shield(ending)
    except asyncio.CancelledError:
        if not ending.done():
            await asyncio.wait({ending}, timeout=CANCEL_SECONDS)
        ending.add_done_callback(_retrieved)
        raise


def _retrieved(ending: asyncio.Future[Any]) -> None:
    # The task was cancelled: nobody awaits the cancel's own failure (a closed channel).
    if not ending.cancelled():
        ending.exception()
