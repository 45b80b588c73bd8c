"""Circuit breaker per http destination (scheme, host and port), fed by the fleet's counts.

Every worker counts its http attempts per destination, ok or error (a retryable outcome:
5xx, 408, 429, network error, timeout), and shares the counts once a second on a fanout
(``worker/fleet.py``); every worker adds up what the whole fleet sent over the window and
runs the same state machine:

- **closed**: attempts run. It opens when, over the window, the fleet made at least
  ``min_volume`` attempts and the share of errors reached ``error_rate``.
- **open** for ``open_seconds``: attempts are deferred (``worker/later.py``), no attempt
  spent.
- **half-open** after that: one attempt at a time runs as a probe, the others are deferred.
  A probe that succeeds closes the circuit, and the worker says so on the fanout, so every
  worker closes it and forgets the window's errors; one that fails opens it again.

Nothing here is kept anywhere but in memory: a worker that starts again learns the fleet's
counts from the next reports, within a second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum


class State(Enum):
    """A circuit's state."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


@dataclass(frozen=True, slots=True)
class BreakerConfig:
    """When a circuit opens and how long it stays open."""

    error_rate: float
    window_seconds: float
    min_volume: int
    open_seconds: float


@dataclass(slots=True)
class Circuit:
    """One destination's counts over the window and its state."""

    #: ok and error counts by whole second of arrival.
    seconds: dict[int, list[int]] = field(default_factory=dict)
    opened_at: float | None = None
    probing: bool = False

    def add(self, ok: int, errors: int, now: float, window: float) -> None:
        """Count ``ok`` and ``errors`` at ``now``, forgetting what left the window."""
        bucket = self.seconds.setdefault(int(now), [0, 0])
        bucket[0] += ok
        bucket[1] += errors
        oldest = now - window
        for second in [s for s in self.seconds if s < oldest]:
            del self.seconds[second]

    def totals(self) -> tuple[int, int]:
        """Attempts and errors over the window."""
        ok = sum(b[0] for b in self.seconds.values())
        errors = sum(b[1] for b in self.seconds.values())
        return ok + errors, errors


class Breaker:
    """The circuits of every destination this worker heard of."""

    def __init__(self, config: BreakerConfig) -> None:
        self.config = config
        self._circuits: dict[str, Circuit] = {}
        #: Counts not shared yet, and the circuits this worker closed since the last report.
        self._pending: dict[str, list[int]] = {}
        self._closed: set[str] = set()

    def state(self, destination: str, now: float) -> State:
        """The circuit's state at ``now``."""
        circuit = self._circuits.get(destination)
        if circuit is None or circuit.opened_at is None:
            return State.CLOSED
        if now < circuit.opened_at + self.config.open_seconds:
            return State.OPEN
        return State.HALF_OPEN

    def admit(self, destination: str, now: float) -> int | None:
        """None to run an attempt now, else the whole seconds to defer it."""
        state = self.state(destination, now)
        if state is State.CLOSED:
            return None
        circuit = self._circuits[destination]
        if state is State.HALF_OPEN and not circuit.probing:
            circuit.probing = True
            return None
        assert circuit.opened_at is not None
        until = circuit.opened_at + self.config.open_seconds - now
        return max(1, math.ceil(until if state is State.OPEN else self.config.open_seconds))

    def ended(self, destination: str, ok: bool, now: float) -> None:
        """An attempt this worker ran ended: count it, and settle a half-open circuit."""
        pending = self._pending.setdefault(destination, [0, 0])
        pending[0 if ok else 1] += 1
        if self.state(destination, now) is not State.HALF_OPEN:
            return
        circuit = self._circuits[destination]
        circuit.probing = False
        if ok:
            self.close(destination)
            self._closed.add(destination)
        else:
            circuit.opened_at = now

    def heard(self, destination: str, ok: int, errors: int, now: float) -> None:
        """Counts a worker of the fleet (this one too) reported; may open the circuit."""
        circuit = self._circuits.setdefault(destination, Circuit())
        circuit.add(ok, errors, now, self.config.window_seconds)
        if circuit.opened_at is None and self._trips(circuit):
            circuit.opened_at = now

    def close(self, destination: str) -> None:
        """Close the circuit and forget its window: a probe succeeded."""
        self._circuits[destination] = Circuit()

    def report(self) -> tuple[dict[str, list[int]], list[str]]:
        """The counts and closings to share, taken: the next report starts afresh."""
        counts, closed = self._pending, sorted(self._closed)
        self._pending, self._closed = {}, set()
        return counts, closed

    def open_circuits(self, now: float) -> dict[str, State]:
        """Every destination whose circuit is not closed, with its state."""
        states = {d: self.state(d, now) for d in self._circuits}
        return {d: s for d, s in states.items() if s is not State.CLOSED}

    def _trips(self, circuit: Circuit) -> bool:
        total, errors = circuit.totals()
        return total >= self.config.min_volume and errors >= self.config.error_rate * total
