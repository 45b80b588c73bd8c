"""Flow control at an attempt's start and end, per http destination: the circuit breaker
(``worker/breaker.py``) and the retry budget (``worker/budget.py``).

A destination is an endpoint (``CRON_FLOW_SCOPE=endpoint``, the default): the task's URL
without its query, user info and fragment, so one failing job does not hold back the other
jobs of its host (an application's jobs usually call one host, ``https://app/cron/<job>``).
With ``CRON_FLOW_SCOPE=host`` it is the scheme, host and port, every path counted together.
No host-wide state is kept beside the endpoints': a host that is down fails each of its
endpoints, whose circuits open on their own counts.

A worker with both off has no ``Flow`` at all: its attempts pay one ``is None``.
"""

from __future__ import annotations

import time
from functools import lru_cache
from typing import Literal

from aio_pika.abc import AbstractConnection
from yarl import URL

from warren_cron.envelope import Envelope
from warren_cron.worker.attempt import Outcome, Result
from warren_cron.worker.breaker import Breaker, BreakerConfig, State
from warren_cron.worker.budget import BUDGET_EXHAUSTED, RetryBudget
from warren_cron.worker.fate import Action, Verdict
from warren_cron.worker.fleet import MAX_CAUSE_CHARS, FleetCounts
from warren_cron.worker.metrics import WorkerMetrics
from warren_cron.worker.settings import WorkerSettings

#: The reason of an attempt deferred because its destination's circuit is open.
CIRCUIT_OPEN = "circuit-open"


#: What the breaker and the budget count by (``CRON_FLOW_SCOPE``).
Scope = Literal["endpoint", "host"]


@lru_cache(maxsize=4096)
def destination(url: str, scope: Scope = "host") -> str | None:
    """``scheme://host:port`` of an http task's URL (the default port spelled out), followed
    by its path for the ``endpoint`` scope; None for anything but an http(s) URL."""
    try:
        parsed = URL(url)
    except (TypeError, ValueError):
        return None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return None
    host = f"{parsed.scheme}://{parsed.host}:{parsed.port}"
    # The path as sent, never the query, user info or fragment, where tokens hide.
    return host if scope == "host" else host + (parsed.raw_path or "/")


#: The one task flow control watches: the destinations it calls are known.
HTTP_TASK = "http"


def task_destination(envelope: Envelope, scope: Scope = "host") -> str | None:
    """The destination of an http task in ``scope``, else None."""
    if envelope.task != HTTP_TASK or not isinstance(envelope.payload, dict):
        return None
    url = envelope.payload.get("url")
    return destination(url, scope) if isinstance(url, str) else None


def cause(result: Result) -> str:
    """What a retryable attempt's failure says, counted toward its circuit: ``HTTP 503``,
    ``timeout``, or the network error's type (``ClientConnectorError``)."""
    if result.http_status is not None:
        return f"HTTP {result.http_status}"
    kind, _, rest = (result.error or "").partition(": ")
    if kind == "RetryableError":  # the http task names the client's error first
        kind = rest.partition(" ")[0]
    return kind if result.reason == "exception" and kind.isidentifier() else result.reason


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
        self._scope: Scope = settings.flow_scope

    async def start(self, consume: AbstractConnection, publish: AbstractConnection) -> None:
        """Start hearing and sharing the fleet's counts."""
        await self._fleet.start(consume, publish)

    async def close(self) -> None:
        """Stop sharing counts."""
        await self._fleet.close()

    def admit(self, envelope: Envelope, attempt: int) -> Result | None:
        """A deferred result when the task's destination's circuit is open, else None (and a
        first attempt is counted toward the budget)."""
        target = task_destination(envelope, self._scope)
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
        opened_by = self.breaker.opened_by(target)
        why = f"the circuit of {target} is open ({opened_by}): deferred {hold} s, no attempt spent"
        return Result(Outcome.DEFERRED, CIRCUIT_OPEN, why, retry_after=hold, key=target)

    def ended(self, envelope: Envelope, result: Result) -> None:
        """Count an attempt that ran, toward its destination's error rate."""
        target = task_destination(envelope, self._scope) if self.breaker is not None else None
        if target is None or self.breaker is None or result.outcome is Outcome.DEFERRED:
            return
        now = time.monotonic()
        ok = result.outcome is not Outcome.RETRYABLE
        self.breaker.ended(target, ok, now, "" if ok else self._cause(envelope, target, result))
        self._metrics.circuit(target, self.breaker.state(target, now).value)

    def _cause(self, envelope: Envelope, target: str, result: Result) -> str:
        """The failure's cause; by host, with its path, to say which job's errors opened it."""
        if self._scope == "endpoint":
            return cause(result)
        path = (task_destination(envelope, "endpoint") or target)[len(target) :]
        return f"{cause(result)} {path}"[:MAX_CAUSE_CHARS]

    def judged(self, envelope: Envelope, verdict: Verdict) -> Verdict:
        """``verdict``, unless it retries past the destination's budget: then a failure."""
        if self.budget is None or verdict.action is not Action.RETRY:
            return verdict
        target = task_destination(envelope, self._scope)
        if target is None or self.budget.grant(target, time.monotonic()):
            return verdict
        self._metrics.budget_refused(target)
        error = f"the retry budget of {target} is spent; last error: {verdict.error}"
        return Verdict(Action.FAIL, BUDGET_EXHAUSTED, error, key=target)

    def states(self) -> dict[str, State]:
        """Destinations whose circuit is not closed, for health pages and tests."""
        return {} if self.breaker is None else self.breaker.open_circuits(time.monotonic())
