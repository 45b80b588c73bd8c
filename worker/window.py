"""Counts over a sliding window of whole seconds, shared by the breaker and the retry budget."""

from __future__ import annotations


class Window:
    """Two counts per whole second of arrival, over the last ``seconds``."""

    __slots__ = ("_buckets", "_seconds")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._buckets: dict[int, list[int]] = {}

    def add(self, first: int, second: int, now: float) -> None:
        """Count ``first`` and ``second`` at ``now``, forgetting what left the window."""
        bucket = self._buckets.setdefault(int(now), [0, 0])
        bucket[0] += first
        bucket[1] += second
        oldest = now - self._seconds
        for stale in [s for s in self._buckets if s < oldest]:
            del self._buckets[stale]

    def totals(self, now: float) -> tuple[int, int]:
        """The two counts over the window ending at ``now``."""
        oldest = now - self._seconds
        kept = [b for s, b in self._buckets.items() if s >= oldest]
        return sum(b[0] for b in kept), sum(b[1] for b in kept)
