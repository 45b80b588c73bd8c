"""A step tried again while what failed it passes by itself: a stream not started yet on its
node, or the robust connection dropped under the step.

Just after a stream is declared (3.10), or for as long as its member takes to start after the
node restarted (4.3), RabbitMQ refuses a declare (NOT_FOUND, "is down or inaccessible") or a
consumer (PRECONDITION_FAILED, "does not have a running replica", or "a replica" on 4.3
just after the declare), or closes the consumer's
whole connection (INTERNAL_ERROR); whatever else was under way on that connection fails with
it. A step that only opens (declares, reads, consumes) is tried again once the connection is
back; one that wrote something must not be.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aio_pika.abc import AbstractConnection, AbstractRobustConnection
from aiormq.exceptions import AMQPError

from warren_cron.errors import BROKER_TROUBLE, CONNECTION_ERRORS

#: How long a service started with the broker waits for its streams to start on their node.
RECOVERY_SECONDS = 30.0
#: The pause between two tries (a drop's own wait is the connection's reconnect interval).
RETRY_SECONDS = 0.5
#: What RabbitMQ says of a stream or durable queue whose member has not started (yet); 4.3
#: says the last of a stream declared a moment before, until its member is registered.
NOT_STARTED = (
    "is down or inaccessible",
    "does not have a running replica",
    "does not have a replica on the local node",
)
R = TypeVar("R")


def passing(connection: AbstractConnection, error: BaseException, transport: object) -> bool:
    """True when ``error`` passes by itself: a member not started yet, or ``connection`` (on
    ``transport`` when the step began) dropped under the step, whatever the step then got."""
    if isinstance(error, AMQPError) and any(words in str(error) for words in NOT_STARTED):
        return True
    robust = isinstance(connection, AbstractRobustConnection) and not connection.close_called
    dropped = isinstance(error, CONNECTION_ERRORS) or connection.transport is not transport
    return robust and dropped and isinstance(error, BROKER_TROUBLE)


async def through_drops(
    connection: AbstractConnection,
    step: Callable[[], Awaitable[R]],
    undo: Callable[[], Awaitable[None]] | None = None,
) -> R:
    """What ``step`` returns, tried again (after ``undo``) while what fails it passes by
    itself, for up to ``RECOVERY_SECONDS``; any other failure is raised at once."""
    give_up = time.monotonic() + RECOVERY_SECONDS
    while True:
        transport = connection.transport
        try:
            return await step()
        except BaseException as error:
            if undo is not None:
                with contextlib.suppress(Exception):
                    await undo()
            if time.monotonic() > give_up or not passing(connection, error, transport):
                raise
        await asyncio.wait_for(connection.ready(), RECOVERY_SECONDS)
        await asyncio.sleep(RETRY_SECONDS)
