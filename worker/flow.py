"""Flow control at an attempt's start and end: the circuit breaker of http destinations.

A worker with the breaker off has no ``Flow`` at all: its attempts pay one ``is None``.
"""

from __future__ import annotations

import time
from functools import lru_cache

from aio_pika.abc import AbstractConnection
from yarl import URL

from warren_cron.envelope import Envelope
from warren_cron.worker.attempt import Outcome, Result
from warren_cron.worker.breaker import Breaker, BreakerConfig, State
from warren_cron.worker.fleet import FleetCounts
from warren_cron.worker.metrics import WorkerMetrics
from warren_cron.worker.settings import WorkerSettings

#: The reason of an attempt deferred because its destination's circuit is open.
CIRCUIT_OPEN = "circuit-open"


@lru_cache(maxsize=4096)
def destination(url: str) -> str | None:
    """``scheme://host:port`` of an http task's URL (the default port spelled out), else None."""
    try:
        parsed = URL(url)
    except (TypeError, ValueError):
        return None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return None
    return f"{parsed.scheme}://{parsed.host}:{parsed.port}"


def task_destination(envelope: Envelope) -> str | None:
    """The destination of an http task, else None."""
    if envelope.task != "http" or not isinstance(envelope.payload, dict):
        return None
    url = envelope.payload.get("url")
    return destination(url) if isinstance(url, str) else None


def breaker_config(settings: WorkerSettings) -> BreakerConfig:
    """The breaker's thresholds from the CRON_BREAKER_* settings."""
    return BreakerConfig(
        settings.breaker_error_rate,
        settings.breaker_window_seconds,
        settings.breaker_min_volume,
        settings.breaker_open_seconds,
    )


class Flow:
    """Defers attempts to destinations whose circuit is open, and counts the others."""

    def __init__(self, settings: WorkerSettings, metrics: WorkerMetrics) -> None:
        self.breaker = Breaker(breaker_config(settings))
        self._fleet = FleetCounts(self.breaker, settings.namespace)
        self._metrics = metrics

    async def start(self, consume: AbstractConnection, publish: AbstractConnection) -> None:
        """Start hearing and sharing the fleet's counts."""
        await self._fleet.start(consume, publish)

    async def close(self) -> None:
        """Stop sharing counts."""
        await self._fleet.close()

    def deferral(self, envelope: Envelope) -> Result | None:
        """A deferred result when the task's destination's circuit is open, else None."""
        target = task_destination(envelope)
        if target is None:
            return None
        hold = self.breaker.admit(target, time.monotonic())
        if hold is None:
            return None
        self._metrics.circuit(target, self.breaker.state(target, time.monotonic()).value)
        why = f"the circuit of {target} is open: deferred {hold} s, no attempt spent"
        return Result(Outcome.DEFERRED, CIRCUIT_OPEN, why, retry_after=hold)

    def ended(self, envelope: Envelope, result: Result) -> None:
        """Count an attempt that ran, toward its destination's error rate."""
        target = task_destination(envelope)
        if target is None:
            return
        now = time.monotonic()
        self.breaker.ended(target, result.outcome is not Outcome.RETRYABLE, now)
        self._metrics.circuit(target, self.breaker.state(target, now).value)

    def states(self) -> dict[str, State]:
        """Destinations whose circuit is not closed, for health pages and tests."""
        return self.breaker.open_circuits(time.monotonic())
