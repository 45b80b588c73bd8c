"""Retry budget per http destination (an endpoint, or a host: ``worker/flow.py``): retries at
most a share of first attempts.

When an endpoint fails for everyone, every task retrying multiplies the load on it. The
budget caps that amplification fleet-wide: over the window, the retries granted to a
destination may be at most ``ratio`` of the first attempts made to it (the fleet's, counted
as the breaker's counts are, ``worker/fleet.py``), plus ``min_retries`` always allowed so that
a quiet destination still gets its retries. A failing attempt refused a retry goes to the
failed queue with reason ``retry-budget-exhausted``.
"""

from __future__ import annotations

from warren_cron.worker.window import Window

#: The reason of a task refused a retry because its destination's budget is spent.
BUDGET_EXHAUSTED = "retry-budget-exhausted"


class RetryBudget:
    """The fleet's first attempts and granted retries per destination."""

    def __init__(self, ratio: float, min_retries: int, window_seconds: float) -> None:
        self._ratio = ratio
        self._min = min_retries
        self._seconds = window_seconds
        self._windows: dict[str, Window] = {}
        #: This worker's counts not shared yet: first attempts and retries by destination.
        self._pending: dict[str, list[int]] = {}

    def first(self, destination: str) -> None:
        """A first attempt to ``destination`` started here."""
        self._pending.setdefault(destination, [0, 0])[0] += 1

    def grant(self, destination: str, now: float) -> bool:
        """True, and the retry counted, when the budget allows one more retry."""
        firsts, retries = self._window(destination).totals(now)
        pending = self._pending.get(destination, [0, 0])
        firsts, retries = firsts + pending[0], retries + pending[1]
        if retries >= self._min + self._ratio * firsts:
            return False
        self._pending.setdefault(destination, [0, 0])[1] += 1
        return True

    def heard(self, destination: str, firsts: int, retries: int, now: float) -> None:
        """Counts a worker of the fleet (this one too) reported."""
        self._window(destination).add(firsts, retries, now)

    def report(self, now: float) -> dict[str, list[int]]:
        """The counts to share, taken: the next report starts afresh. Destinations with
        nothing left in their window are forgotten meanwhile (endpoints called once)."""
        pending, self._pending = self._pending, {}
        idle = [d for d, w in self._windows.items() if w.totals(now) == (0, 0)]
        for destination in idle:
            del self._windows[destination]
        return pending

    def _window(self, destination: str) -> Window:
        window = self._windows.get(destination)
        if window is None:
            window = self._windows[destination] = Window(self._seconds)
        return window
