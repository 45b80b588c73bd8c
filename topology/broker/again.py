"""Work beside a session that a broker hiccup must not end for the rest of the session.

A scheduler's beats and its reading of the others' beats run for as long as its connection
lives. A call that fails while the node boots (a stream not up yet) or a channel the broker
closed must not silence them until the next connection: a scheduler that stops beating is
counted out by its peers, and one that stops reading the beats never spreads its partitions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog
from aio_pika.abc import AbstractConnection

from warren_cron.broker.connect import is_gone
from warren_cron.errors import BROKER_TROUBLE, being_cancelled

log = structlog.get_logger("broker")


async def until_it_works(
    work: Callable[[], Awaitable[None]], connection: AbstractConnection, every: float, what: str
) -> bool:
    """Await ``work()``, again every ``every`` seconds while it fails with a broker error;
    False once ``connection`` is gone (its session ends; the next one starts over). The
    first failure of a run of them is a warning, the others debug lines."""
    failures = 0
    while not is_gone(connection):
        try:
            await work()
        except BROKER_TROUBLE as error:
            if being_cancelled():
                # aiormq closes a channel whose call was cancelled, and a failing close can
                # raise in place of the cancel: tried again, the task would never end.
                raise asyncio.CancelledError from error
            say = log.warning if failures == 0 else log.debug
            say(f"{what} failed; trying again", every_s=every, error=repr(error))
            failures += 1
        else:
            return True
        await asyncio.sleep(every)
    return False
