"""The worker's metrics: recorded only when ``CRON_METRICS_PORT`` serves them.

prometheus-client is imported only then, so a worker without metrics starts faster and
spends nothing per attempt on them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from warren_cron.clock import utcnow

#: Most keys and destinations one worker labels its flow metrics with (``cron_flow_deferred``,
#: ``cron_breaker_state``, ``cron_retry_budget_refused``); the others count as ``other``.
MAX_KEYS = 100
#: The gauge's value of each circuit state.
_CIRCUIT_LEVELS = {"closed": 0, "half-open": 1, "open": 2}


class WorkerMetrics:
    """Counts attempts, retries, failures, durations and start lag by task."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._children: dict[tuple[str, str], Any] = {}
        self._keys: set[str] = set()
        if enabled:
            from warren_cron.runtime import metrics

            self._m = metrics

    def attempt(self, task: str, outcome: str, reason: str, seconds: float) -> None:
        """Record one attempt's outcome and duration."""
        if not self.enabled:
            return
        self._child(task, outcome).inc()
        self._m.ATTEMPT_SECONDS.labels(task=task).observe(seconds)
        if outcome == "retrying":
            self._m.RETRIES.labels(task=task).inc()
        elif outcome == "failed":
            self._m.FAILED.labels(task=task, reason=reason).inc()

    def circuit(self, destination: str, state: str) -> None:
        """Record the state of a destination's circuit (bounded, see MAX_KEYS)."""
        if self.enabled:
            gauge = self._m.BREAKER_STATE.labels(destination=self._label(destination))
            gauge.set(_CIRCUIT_LEVELS[state])

    def budget_refused(self, destination: str) -> None:
        """Record a retry refused because the destination's retry budget is spent."""
        if self.enabled:
            self._m.BUDGET_REFUSED.labels(destination=self._label(destination)).inc()

    def deferred(self, reason: str, key: str) -> None:
        """Record an attempt deferred by flow control under ``key`` (bounded, see MAX_KEYS)."""
        if self.enabled:
            self._m.LIMIT_WAITS.labels(reason=reason, key=self._label(key)).inc()

    def _label(self, key: str) -> str:
        # Destinations are endpoints by default: a path per job, or per id, must not grow
        # the metrics without bound.
        if key not in self._keys:
            if len(self._keys) >= MAX_KEYS:
                return "other"
            self._keys.add(key)
        return key

    def started(self, scheduled_for: datetime, attempt: int) -> None:
        """Record the lag from a fire's scheduled time to its first attempt's start."""
        if self.enabled and attempt == 1:
            lag = (utcnow() - scheduled_for).total_seconds()
            self._m.FIRE_LAG.labels(stage="start").observe(max(lag, 0.0))

    def _child(self, task: str, outcome: str) -> Any:
        # .labels() takes a lock and builds a key each call: keep the children.
        key = (task, outcome)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._m.ATTEMPTS.labels(task=task, outcome=outcome)
        return child
