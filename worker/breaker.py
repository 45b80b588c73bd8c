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
from dataclasses import dataclass
from enum import Enum

from warren_cron.worker.window import Window


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
    """One destination's ok and error counts over the window, and its state."""

    window: Window
    opened_at: float | None = None
    probing: bool = False


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
        circuit = self._circuits.get(destination) or self.close(destination)
        circuit.window.add(ok, errors, now)
        if circuit.opened_at is None and self._trips(circuit, now):
            circuit.opened_at = now

    def close(self, destination: str) -> Circuit:
        """Close the circuit and forget its window (a probe succeeded); return it."""
        circuit = self._circuits[destination] = Circuit(Window(self.config.window_seconds))
        return circuit

    def report(self) -> tuple[dict[str, list[int]], list[str]]:
        """The counts and closings to share, taken: the next report starts afresh."""
        counts, closed = self._pending, sorted(self._closed)
        self._pending, self._closed = {}, set()
        return counts, closed

    def open_circuits(self, now: float) -> dict[str, State]:
        """Every destination whose circuit is not closed, with its state."""
        states = {d: self.state(d, now) for d in self._circuits}
        return {d: s for d, s in states.items() if s is not State.CLOSED}

    def _trips(self, circuit: Circuit, now: float) -> bool:
        ok, errors = circuit.window.totals(now)
        total = ok + errors
        return total >= self.config.min_volume and errors >= self.config.error_rate * total
