"""What the flow page shows: per key (a destination, ``schedule:<name>``, a task and its
key value), the attempts flow control deferred and the failures a spent retry budget caused,
folded from the history's ``deferred`` attempts and ``failed`` events (their ``key``).

A circuit is shown open while its destination's attempts are being deferred: the monitor
knows the fleet only from the history, so a circuit that closed is seen as one that stopped
deferring. Bounded: at most ``MAX_KEYS`` keys, the least recently seen dropped first, and a
key not seen for a day is forgotten.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from warren_cron.history.events import Event

#: Most keys the page keeps.
MAX_KEYS = 1000
#: A circuit is shown open while its last deferral is this recent.
OPEN_WITHIN = timedelta(seconds=60)
#: Keys not seen for this long are forgotten.
KEEP = timedelta(hours=24)
CIRCUIT_OPEN = "circuit-open"
BUDGET_EXHAUSTED = "retry-budget-exhausted"


@dataclass(slots=True)
class KeySeen:
    """One key's deferrals by reason and budget failures, and the last of them."""

    key: str
    last_at: datetime
    deferred: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    last_error: str = ""
    last_circuit_at: datetime | None = None

    def circuit(self, now: datetime) -> str | None:
        """``open`` while its circuit defers attempts, ``deferring stopped`` once it did;
        None for a key no circuit ever deferred."""
        if self.last_circuit_at is None:
            return None
        return "open" if now - self.last_circuit_at <= OPEN_WITHIN else "deferring stopped"


class FlowSeen:
    """Keys folded from followed history events."""

    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self.keys: OrderedDict[str, KeySeen] = OrderedDict()
        self._max = max_keys

    def on_events(self, events: list[Event], offset: int) -> None:
        """Count the deferrals and budget failures among ``events`` (a follower's callback)."""
        for event in events:
            key = event.get("key")
            if not isinstance(key, str):
                continue
            if event.type == "attempt" and event.get("outcome") == "deferred":
                seen = self._seen(key, event)
                reason = str(event.get("reason"))
                seen.deferred[reason] = seen.deferred.get(reason, 0) + 1
                if reason == CIRCUIT_OPEN:
                    seen.last_circuit_at = event.at
            elif event.type == "failed" and event.get("reason") == BUDGET_EXHAUSTED:
                self._seen(key, event).refused += 1

    def _seen(self, key: str, event: Event) -> KeySeen:
        seen = self.keys.get(key)
        if seen is None:
            seen = self.keys[key] = KeySeen(key, event.at)
        seen.last_at = max(seen.last_at, event.at)
        seen.last_error = str(event.get("error") or "")
        self.keys.move_to_end(key)
        while len(self.keys) > self._max:
            self.keys.popitem(last=False)
        return seen

    def rows(self, now: datetime) -> list[KeySeen]:
        """Keys seen in the last day, open circuits first, then the most recently seen."""
        for key in [k for k, s in self.keys.items() if s.last_at < now - KEEP]:
            del self.keys[key]
        return sorted(
            self.keys.values(),
            key=lambda s: (s.circuit(now) != "open", -s.last_at.timestamp()),
        )
