"""The fleet's http counts: each worker shares its own once a second on a fanout exchange
and hears everyone's (its own too) in an exclusive queue of its own, a new one (named by the
broker) after each reconnect.

The exchange ``<ns>_flow`` is auto-deleted with the last worker's queue, and each queue with
its worker's connection: a worker gone leaves nothing behind, and nothing outlives the
fleet. A report is one small JSON object, sent without confirm when there is something to
say: per destination, the breaker's ok and error counts (``breaker``), its errors by cause
(``causes``: ``{"HTTP 503": 4}``, which a worker of an older release leaves out and ignores)
and the circuits this worker closed (``closed``), and the retry budget's first attempts and
retries (``budget``). A lost report costs a second of counts, never a task; what is
malformed in one is left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import aio_pika
import orjson
import structlog
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractRobustChannel
from aiormq.abc import DeliveredMessage

from warren_cron.broker.underlay import underlay
from warren_cron.names import Names
from warren_cron.worker.breaker import Breaker
from warren_cron.worker.budget import RetryBudget

log = structlog.get_logger("worker")
#: Seconds between two reports of a worker's counts.
REPORT_SECONDS = 1.0
Counts = dict[str, tuple[int, int]]
Causes = dict[str, dict[str, int]]
#: A cause longer than this, or more causes per destination, is left out of a report heard.
MAX_CAUSE_CHARS = 64
MAX_CAUSES = 16


def flow_exchange(namespace: str) -> str:
    """The fanout the workers of ``namespace`` share their counts on."""
    return Names(namespace).flow_exchange


@dataclass(frozen=True, slots=True)
class Report:
    """One worker's counts of one second."""

    breaker: Counts = field(default_factory=dict)
    closed: list[str] = field(default_factory=list)
    budget: Counts = field(default_factory=dict)
    causes: Causes = field(default_factory=dict)


def read_report(body: bytes) -> Report:
    """A report; whatever is malformed in it is left out."""
    try:
        raw = orjson.loads(body)
    except orjson.JSONDecodeError:
        return Report()
    if not isinstance(raw, dict):
        return Report()
    closed = raw.get("closed")
    names = [d for d in (closed if isinstance(closed, list) else []) if isinstance(d, str)]
    breaker, budget = _counts(raw.get("breaker")), _counts(raw.get("budget"))
    return Report(breaker, names, budget, _causes(raw.get("causes")))


def _counts(raw: Any) -> Counts:
    if not isinstance(raw, dict):
        return {}
    return {
        destination: (pair[0], pair[1])
        for destination, pair in raw.items()
        if isinstance(pair, list)
        and len(pair) == 2
        and all(isinstance(n, int) and 0 <= n < 2**31 for n in pair)
    }


def _causes(raw: Any) -> Causes:
    if not isinstance(raw, dict):
        return {}
    causes = {destination: _tally(tally) for destination, tally in raw.items()}
    return {destination: tally for destination, tally in causes.items() if tally}


def _tally(raw: Any) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    kept = {
        cause: n
        for cause, n in raw.items()
        if len(cause) <= MAX_CAUSE_CHARS and isinstance(n, int) and 0 < n < 2**31
    }
    return dict(list(kept.items())[:MAX_CAUSES])


class FleetCounts:
    """Shares this worker's counts and feeds the fleet's into the breaker and the budget."""

    def __init__(self, breaker: Breaker | None, budget: RetryBudget | None, namespace: str) -> None:
        self._breaker = breaker
        self._budget = budget
        self._exchange_name = flow_exchange(namespace)
        self._publisher: AbstractChannel | None = None
        self._listener: AbstractChannel | None = None
        self._relisten: asyncio.Task[None] | None = None
        self._loop: asyncio.Task[None] | None = None

    async def start(self, consume: AbstractConnection, publish: AbstractConnection) -> None:
        """Declare the fanout and this worker's queue, consume it, and report every second."""
        self._listener = await consume.channel()
        await self._listener.declare_exchange(
            self._exchange_name, aio_pika.ExchangeType.FANOUT, auto_delete=True
        )
        await self._listen()
        if isinstance(self._listener, AbstractRobustChannel):
            self._listener.reopen_callbacks.add(self._on_reopen)
        self._publisher = await publish.channel(publisher_confirms=False)
        self._loop = asyncio.get_running_loop().create_task(self._report_forever())

    async def _listen(self) -> None:
        """A new queue, named by the broker, bound and consumed. Not aio-pika's robust queue,
        which declares the same name again after a reconnect: RabbitMQ 4.2 and later keep an
        exclusive queue of a node seen down until it is back, so that declare would fail on
        the next node, and with it the whole consuming connection's restore, again and again."""
        assert self._listener is not None
        raw = await underlay(self._listener)
        declared = await raw.queue_declare("", exclusive=True, auto_delete=True)
        assert declared.queue is not None
        await raw.queue_bind(declared.queue, self._exchange_name)
        await raw.basic_consume(declared.queue, self._heard, no_ack=True)

    def _on_reopen(self, _channel: object) -> None:
        task = asyncio.get_running_loop().create_task(self._listen_logged())
        self._relisten = task  # kept referenced until done

    async def _listen_logged(self) -> None:
        try:
            await self._listen()
        except Exception as error:  # deaf to the fleet until the next reconnect, never fatal
            log.warning("fleet counts not heard", error=repr(error))

    async def close(self) -> None:
        """Stop reporting."""
        if self._loop is not None:
            self._loop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop

    async def _heard(self, message: DeliveredMessage) -> None:
        report, now = read_report(message.body), time.monotonic()
        if self._breaker is not None:
            for destination in report.closed:
                self._breaker.close(destination)
            for destination, (ok, errors) in report.breaker.items():
                causes = report.causes.get(destination)
                self._breaker.heard(destination, ok, errors, now, causes)
        if self._budget is not None:
            for destination, (firsts, retries) in report.budget.items():
                self._budget.heard(destination, firsts, retries, now)

    def _taken(self) -> dict[str, Any]:
        """What this worker has to say since its last report."""
        said: dict[str, Any] = {}
        now = time.monotonic()
        if self._breaker is not None:
            said["breaker"], said["closed"], said["causes"] = self._breaker.report(now)
        if self._budget is not None:
            said["budget"] = self._budget.report(now)
        return {part: value for part, value in said.items() if value}

    async def _report_forever(self) -> None:
        while True:
            await asyncio.sleep(REPORT_SECONDS)
            if said := self._taken():
                await self._send(orjson.dumps(said))

    async def _send(self, body: bytes) -> None:
        assert self._publisher is not None
        try:
            exchange = await self._publisher.get_exchange(self._exchange_name, ensure=False)
            await exchange.publish(aio_pika.Message(body), "")
        except Exception as error:
            # Counts lost for a second are a smaller harm than a worker that stops reporting.
            log.warning("flow counts not shared", error=repr(error))
