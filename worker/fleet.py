"""The fleet's http counts: each worker shares its own once a second on a fanout exchange
and hears everyone's (its own too) in an exclusive queue of its own.

The exchange ``<ns>_flow`` is auto-deleted with the last worker's queue, and each queue with
its worker's connection: a worker gone leaves nothing behind, and nothing outlives the
fleet. Reports are small (one JSON object of counts per destination that saw attempts in
that second), sent without confirms: a lost one costs a second of counts, never a task.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import aio_pika
import orjson
import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage

from warren_cron.worker.breaker import Breaker

log = structlog.get_logger("worker")
#: Seconds between two reports of a worker's counts.
REPORT_SECONDS = 1.0


def flow_exchange(namespace: str) -> str:
    """The fanout the workers of ``namespace`` share their counts on."""
    return f"{namespace}_flow"


def read_report(body: bytes) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Counts and closings of a report; whatever is malformed in it is left out."""
    try:
        report = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}, []
    if not isinstance(report, dict):
        return {}, []
    counts = report.get("counts")
    closed = report.get("closed")
    return _counts(counts if isinstance(counts, dict) else {}), [
        d for d in (closed if isinstance(closed, list) else []) if isinstance(d, str)
    ]


def _counts(raw: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {
        destination: (pair[0], pair[1])
        for destination, pair in raw.items()
        if isinstance(pair, list)
        and len(pair) == 2
        and all(isinstance(n, int) and 0 <= n < 2**31 for n in pair)
    }


class FleetCounts:
    """Shares this worker's counts and feeds the fleet's into the breaker."""

    def __init__(self, breaker: Breaker, namespace: str) -> None:
        self._breaker = breaker
        self._exchange_name = flow_exchange(namespace)
        self._publisher: AbstractChannel | None = None
        self._loop: asyncio.Task[None] | None = None

    async def start(self, consume: AbstractConnection, publish: AbstractConnection) -> None:
        """Declare the fanout and this worker's queue, consume it, and report every second."""
        listener = await consume.channel()
        exchange = await listener.declare_exchange(
            self._exchange_name, aio_pika.ExchangeType.FANOUT, auto_delete=True
        )
        queue = await listener.declare_queue(exclusive=True, auto_delete=True)
        await queue.bind(exchange)
        await queue.consume(self._heard, no_ack=True)
        self._publisher = await publish.channel(publisher_confirms=False)
        self._loop = asyncio.get_running_loop().create_task(self._report_forever())

    async def close(self) -> None:
        """Stop reporting."""
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop

    async def _heard(self, message: AbstractIncomingMessage) -> None:
        counts, closed = read_report(message.body)
        now = time.monotonic()
        for destination in closed:
            self._breaker.close(destination)
        for destination, (ok, errors) in counts.items():
            self._breaker.heard(destination, ok, errors, now)

    async def _report_forever(self) -> None:
        while True:
            await asyncio.sleep(REPORT_SECONDS)
            counts, closed = self._breaker.report()
            if counts or closed:
                await self._send(orjson.dumps({"counts": counts, "closed": closed}))

    async def _send(self, body: bytes) -> None:
        assert self._publisher is not None
        try:
            exchange = await self._publisher.get_exchange(self._exchange_name, ensure=False)
            await exchange.publish(aio_pika.Message(body), "")
        except Exception as error:
            # Counts lost for a second are a smaller harm than a worker that stops reporting.
            log.warning("flow counts not shared", error=repr(error))
