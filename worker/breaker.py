"""Circuit breaker per http destination, fed by the fleet's counts.

A destination is an endpoint by default (the task's URL without its query): one job whose
path always fails does not hold back the other jobs of its host. ``CRON_FLOW_SCOPE=host``
keys by scheme, host and port instead (``worker/flow.py``).

Every worker counts its http attempts per destination, ok or error (a retryable outcome:
5xx, 408, 429, network error, timeout) with the error's cause (``HTTP 503``, ``timeout``,
``ClientConnectorError``), and shares the counts once a second on a fanout
(``worker/fleet.py``); every worker adds up what the whole fleet sent over the window and
runs the same state machine:

- **closed**: attempts run. It opens when, over the window, the fleet made at least
  ``min_volume`` attempts and the share of errors reached ``error_rate``; the causes of the
  window's errors are kept, to say why it opened.
- **open** for ``open_seconds``: attempts are deferred (``worker/later.py``), no attempt
  spent.
- **half-open** after that: one attempt at a time runs as a probe, the others are deferred.
  A probe that succeeds closes the circuit, and the worker says so on the fanout, so every
  worker closes it and forgets the window's errors; one that fails opens it again.

Nothing here is kept anywhere but in memory: a worker that starts again learns the fleet's
counts from the next reports, within a second. A closed circuit with nothing left in its
window is forgotten, so endpoints called once leave nothing behind.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from warren_cron.worker.window import Window

#: Causes named in a circuit's ``opened_by``, the most frequent first.
MAX_CAUSES_SAID = 3


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


class Causes:
    """Errors by cause over a sliding window of whole seconds."""

    __slots__ = ("_buckets", "_seconds")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._buckets: dict[int, Counter[str]] = {}

    def add(self, causes: Mapping[str, int], now: float) -> None:
        """Count ``causes`` at ``now``, forgetting what left the window."""
        self._buckets.setdefault(int(now), Counter()).update(causes)
        oldest = now - self._seconds
        for stale in [s for s in self._buckets if s < oldest]:
            del self._buckets[stale]

    def totals(self, now: float) -> Counter[str]:
        """The causes over the window ending at ``now``."""
        oldest = now - self._seconds
        return sum((b for s, b in self._buckets.items() if s >= oldest), Counter())


@dataclass(slots=True)
class Circuit:
    """One destination's ok and error counts over the window, and its state."""

    window: Window
    causes: Causes
    opened_at: float | None = None
    probing: bool = False
    #: What opened it: ``N of M attempts failed over S s: HTTP 503 x18, timeout x2``.
    opened_by: str = field(default="")


class Breaker:
    """The circuits of every destination this worker heard of."""

    def __init__(self, config: BreakerConfig) -> None:
        self.config = config
        self._circuits: dict[str, Circuit] = {}
        #: Counts not shared yet, their errors' causes, and the circuits this worker closed
        #: since the last report.
        self._pending: dict[str, list[int]] = {}
        self._causes: dict[str, Counter[str]] = {}
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

    def ended(self, destination: str, ok: bool, now: float, cause: str = "error") -> None:
        """An attempt this worker ran ended: count it (an error with its ``cause``), and settle
        a half-open circuit."""
        pending = self._pending.setdefault(destination, [0, 0])
        pending[0 if ok else 1] += 1
        if not ok:
            self._causes.setdefault(destination, Counter())[cause] += 1
        if self.state(destination, now) is not State.HALF_OPEN:
            return
        circuit = self._circuits[destination]
        circuit.probing = False
        if ok:
            self.close(destination)
            self._closed.add(destination)
        else:
            circuit.opened_at = now

    def heard(
        self,
        destination: str,
        ok: int,
        errors: int,
        now: float,
        causes: Mapping[str, int] | None = None,
    ) -> None:
        """Counts a worker of the fleet (this one too) reported, with its errors' causes (a
        worker of an older release sends none); may open the circuit."""
        circuit = self._circuits.get(destination) or self.close(destination)
        circuit.window.add(ok, errors, now)
        circuit.causes.add(causes or {}, now)
        if circuit.opened_at is None and self._trips(circuit, now):
            circuit.opened_at = now
            circuit.opened_by = self._why(circuit, now)

    def opened_by(self, destination: str) -> str:
        """What opened the destination's circuit, or "" when it is closed."""
        circuit = self._circuits.get(destination)
        return "" if circuit is None or circuit.opened_at is None else circuit.opened_by

    def close(self, destination: str) -> Circuit:
        """Close the circuit and forget its window (a probe succeeded); return it."""
        seconds = self.config.window_seconds
        circuit = self._circuits[destination] = Circuit(Window(seconds), Causes(seconds))
        return circuit

    def report(self, now: float) -> tuple[dict[str, list[int]], list[str], dict[str, Counter[str]]]:
        """The counts, closings and causes to share, taken: the next report starts afresh.
        Closed circuits with an empty window are forgotten meanwhile."""
        counts, closed, causes = self._pending, sorted(self._closed), self._causes
        self._pending, self._closed, self._causes = {}, set(), {}
        self._forget_idle(now)
        return counts, closed, causes

    def open_circuits(self, now: float) -> dict[str, State]:
        """Every destination whose circuit is not closed, with its state."""
        states = {d: self.state(d, now) for d in self._circuits}
        return {d: s for d, s in states.items() if s is not State.CLOSED}

    def _trips(self, circuit: Circuit, now: float) -> bool:
        ok, errors = circuit.window.totals(now)
        total = ok + errors
        return total >= self.config.min_volume and errors >= self.config.error_rate * total

    def _why(self, circuit: Circuit, now: float) -> str:
        ok, errors = circuit.window.totals(now)
        causes = circuit.causes.totals(now).most_common(MAX_CAUSES_SAID)
        said = "".join(f", {cause} x{count}" for cause, count in causes)
        window = f"{self.config.window_seconds:g}"
        return f"opened by {errors} of {ok + errors} attempts failing over {window} s{said}"

    def _forget_idle(self, now: float) -> None:
        idle = [
            d
            for d, c in self._circuits.items()
            if c.opened_at is None and c.window.totals(now) == (0, 0)
        ]
        for destination in idle:
            del self._circuits[destination]
