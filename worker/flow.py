"""Flow control at an attempt's start and end, per http destination: the circuit breaker
(``worker/breaker.py``) and the retry budget (``worker/budget.py``).

A worker with both off has no ``Flow`` at all: its attempts pay one ``is None``.
"""

from __future__ import annotations

import time
from functools import lru_cache

from aio_pika.abc import AbstractConnection
from yarl import URL

from warren_cron.envelope import Envelope
from warren_cron.worker.attempt import Outcome, Result
from warren_cron.worker.breaker import Breaker, BreakerConfig, State
from warren_cron.worker.budget import BUDGET_EXHAUSTED, RetryBudget
from warren_cron.worker.fate import Action, Verdict
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


def wanted(settings: WorkerSettings) -> bool:
    """True when the settings turn on any of the breaker and the retry budget."""
    return settings.breaker_enabled or settings.retry_budget_enabled


class Flow:
    """Defers attempts to destinations whose circuit is open, counts the others, and refuses
    retries past a destination's budget."""

    def __init__(self, settings: WorkerSettings, metrics: WorkerMetrics) -> None:
        self.breaker = Breaker(breaker_config(settings)) if settings.breaker_enabled else None
        self.budget = (
            RetryBudget(
                settings.retry_budget_ratio,
                settings.retry_budget_min_retries,
                settings.retry_budget_window_seconds,
            )
            if settings.retry_budget_enabled
            else None
        )
        self._fleet = FleetCounts(self.breaker, self.budget, settings.namespace)
        self._metrics = metrics

    async def start(self, consume: AbstractConnection, publish: AbstractConnection) -> None:
        """Start hearing and sharing the fleet's counts."""
        await self._fleet.start(consume, publish)

    async def close(self) -> None:
        """Stop sharing counts."""
        await self._fleet.close()

    def admit(self, envelope: Envelope, attempt: int) -> Result | None:
        """A deferred result when the task's destination's circuit is open, else None (and a
        first attempt is counted toward the budget)."""
        target = task_destination(envelope)
        if target is None:
            return None
        if self.breaker is not None and (deferred := self._deferral(target)) is not None:
            return deferred
        if self.budget is not None and attempt == 1:
            self.budget.first(target)
        return None

    def _deferral(self, target: str) -> Result | None:
        assert self.breaker is not None
        now = time.monotonic()
        hold = self.breaker.admit(target, now)
        if hold is None:
            return None
        self._metrics.circuit(target, self.breaker.state(target, now).value)
        why = f"the circuit of {target} is open: deferred {hold} s, no attempt spent"
        return Result(Outcome.DEFERRED, CIRCUIT_OPEN, why, retry_after=hold, key=target)

    def ended(self, envelope: Envelope, result: Result) -> None:
        """Count an attempt that ran, toward its destination's error rate."""
        target = task_destination(envelope) if self.breaker is not None else None
        if target is None or self.breaker is None or result.outcome is Outcome.DEFERRED:
            return
        now = time.monotonic()
        self.breaker.ended(target, result.outcome is not Outcome.RETRYABLE, now)
        self._metrics.circuit(target, self.breaker.state(target, now).value)

    def judged(self, envelope: Envelope, verdict: Verdict) -> Verdict:
        """``verdict``, unless it retries past the destination's budget: then a failure."""
        if self.budget is None or verdict.action is not Action.RETRY:
            return verdict
        target = task_destination(envelope)
        if target is None or self.budget.grant(target, time.monotonic()):
            return verdict
        self._metrics.budget_refused(target)
        error = f"the retry budget of {target} is spent; last error: {verdict.error}"
        return Verdict(Action.FAIL, BUDGET_EXHAUSTED, error, key=target)

    def states(self) -> dict[str, State]:
        """Destinations whose circuit is not closed, for health pages and tests."""
        return {} if self.breaker is None else self.breaker.open_circuits(time.monotonic())
