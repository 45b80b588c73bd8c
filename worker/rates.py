"""Rate limits by task across every worker: at most ``limit`` starts per ``period``, with a
``burst``, as a token bucket kept by the broker.

The bucket is the queue ``<ns>_rate.<task>`` with ``x-max-length`` = burst and
``x-overflow: drop-head``: a token published into a full bucket pushes the oldest out, so it
never holds more than the burst. An attempt takes a token with one ``basic.get`` (no ack: a
token taken is spent); it finds none, and it is deferred a second through the delay levels,
no attempt spent, while the worker goes on with other tasks. One worker of the fleet refills
each bucket, one token every ``period / limit``: the one holding the exclusive queue
``<ns>_rate-refill.<task>``, so a refiller that dies is replaced by another worker within a
second, with nothing but the broker.

``CRON_RATE_LIMITS`` lists them: ``report=10/1s`` (ten starts a second, burst 10),
``sync=100/1m:5`` (a hundred a minute, at most five at once after a quiet spell).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from dataclasses import dataclass
from typing import Any

import aio_pika
import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection

from warren_cron.broker.exclusive import try_exclusive
from warren_cron.errors import BROKER_TROUBLE, SettingsError
from warren_cron.worker.attempt import Outcome, Result

log = structlog.get_logger("worker")
#: The reason of an attempt deferred because its task's bucket is empty.
RATE_LIMITED = "rate-limit"
#: Seconds a task waits before it looks for a token again; a worker looks for the refill
#: lock as often.
WAIT_SECONDS = 1
_UNITS = {"s": 1, "m": 60, "h": 3600}
_RATE = re.compile(
    r"^(?P<task>[\w.-]+)=(?P<n>\d+)/(?P<every>\d*)(?P<unit>[smh])(?::(?P<burst>\d+))?$"
)


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``limit`` starts of ``task`` per ``period`` seconds, ``burst`` at once."""

    task: str
    limit: int
    period: float
    burst: int

    @property
    def interval(self) -> float:
        """Seconds between two tokens."""
        return self.period / self.limit


def parse_rates(entries: list[str]) -> dict[str, Rate]:
    """``CRON_RATE_LIMITS`` entries by task; a clear error for a malformed one."""
    rates: dict[str, Rate] = {}
    for entry in entries:
        match = _RATE.match(entry.strip())
        if match is None or int(match["n"]) < 1 or (match["burst"] or "1") == "0":
            raise SettingsError(
                f"CRON_RATE_LIMITS entry {entry!r} is not task=N/PERIOD[:BURST] with N and "
                "BURST at least 1 and PERIOD like 1s, 5m or h, e.g. report=10/1s,sync=100/1m:5"
            )
        period = int(match["every"] or 1) * _UNITS[match["unit"]]
        n = int(match["n"])
        rates[match["task"]] = Rate(match["task"], n, period, int(match["burst"] or n))
    return rates


def bucket_queue(namespace: str, task: str) -> str:
    """The queue holding ``task``'s tokens."""
    return f"{namespace}_rate.{task}"


class Buckets:
    """Takes tokens for this worker's attempts, and refills the buckets it holds the lock of."""

    def __init__(self, namespace: str, rates: dict[str, Rate]) -> None:
        self._namespace = namespace
        self._rates = rates
        self._channel: AbstractChannel | None = None
        self._loops: list[asyncio.Task[None]] = []

    async def start(self, connection: AbstractConnection) -> None:
        """Declare the buckets and start looking for the refill locks."""
        self._channel = await connection.channel()
        for rate in self._rates.values():
            await self._declare(self._channel, rate)
            loop = asyncio.get_running_loop().create_task(self._refill(connection, rate))
            self._loops.append(loop)

    async def close(self) -> None:
        """Stop refilling (the lock goes with the connection)."""
        for loop in self._loops:
            loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop

    async def admit(self, task: str) -> Result | None:
        """None when the task may start now (a token taken or no limit), else a deferral."""
        if task not in self._rates or self._channel is None:
            return None
        try:
            queue = await self._channel.get_queue(bucket_queue(self._namespace, task), ensure=False)
            token = await queue.get(no_ack=True, fail=False)
        except BROKER_TROUBLE as error:
            return _deferred(f"cannot reach the bucket of {task}: {error!r}")
        return None if token is not None else _deferred(f"no token left for {task}")

    async def _declare(self, channel: AbstractChannel, rate: Rate) -> None:
        args: dict[str, Any] = {"x-max-length": rate.burst, "x-overflow": "drop-head"}
        await channel.declare_queue(bucket_queue(self._namespace, rate.task), arguments=args)

    async def _refill(self, connection: AbstractConnection, rate: Rate) -> None:
        while True:
            try:
                await self._refill_while_held(connection, rate)
            except BROKER_TROUBLE as error:
                log.warning("rate bucket not refilled", task=rate.task, error=repr(error))
            await asyncio.sleep(WAIT_SECONDS)

    async def _refill_while_held(self, connection: AbstractConnection, rate: Rate) -> None:
        lock = f"{self._namespace}_rate-refill.{rate.task}"
        while True:
            if await try_exclusive(connection, lock) is not None:
                break
            await asyncio.sleep(WAIT_SECONDS)
        channel = await connection.channel()
        name = bucket_queue(self._namespace, rate.task)
        due = time.monotonic()
        while True:
            await channel.default_exchange.publish(aio_pika.Message(b""), name)
            # Paced from a fixed start, so the time each publish takes does not slow the rate.
            due += rate.interval
            await asyncio.sleep(max(0.0, due - time.monotonic()))


def _deferred(why: str) -> Result:
    error = f"{why}; deferred {WAIT_SECONDS} s"
    return Result(Outcome.DEFERRED, RATE_LIMITED, error, retry_after=WAIT_SECONDS)
