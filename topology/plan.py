"""Retry plans: the list of delays still ahead of a message, spelled as its routing key.

A plan of three retries of 30 s, 60 s and 120 s has the key ``30s-1m-2m``; after the first
retry the message carries ``1m-2m``, and its last attempt carries ``final``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache

from warren_cron.durations import key_spelling, parse_ms
from warren_cron.errors import PlanError
from warren_cron.names import FINAL_KEY

#: RabbitMQ limits a queue's x-message-ttl to 2^32 - 1 ms.
MAX_DELAY_MS = 2**32 - 1
_STEP_UNITS = ("ms", "s", "m", "h")


def format_delay(ms: int) -> str:
    """Spell a delay as a plan step: 30000 -> ``30s``."""
    return key_spelling(ms)


def parse_delay(step: str) -> int:
    """Read one plan step such as ``500ms`` or ``2m`` back into milliseconds."""
    ms = parse_ms(step, _STEP_UNITS, compound=False)
    if ms is None:
        raise PlanError(f"retry step {step!r} is not a delay like 500ms, 30s, 1m or 2h")
    return ms


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """The delays, in milliseconds, between the attempts still ahead of a message."""

    delays_ms: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for delay in self.delays_ms:
            if not 0 <= delay <= MAX_DELAY_MS:
                raise PlanError(f"retry delay {delay} ms is outside 0..{MAX_DELAY_MS}")

    @classmethod
    def exponential(
        cls, retries: int, delay_ms: int, multiplier: float, max_delay_ms: int | None = None
    ) -> RetryPlan:
        """Plan where retry n waits ``delay_ms * multiplier**(n-1)``, capped at ``max_delay_ms``."""
        cap = MAX_DELAY_MS if max_delay_ms is None else max_delay_ms
        if cls is not RetryPlan:
            return cls(tuple(min(round(delay_ms * multiplier**n), cap) for n in range(retries)))
        return _exponential(retries, delay_ms, multiplier, cap)

    @classmethod
    def from_key(cls, key: str) -> RetryPlan:
        """Read a routing key (``30s-1m-2m`` or ``final``) back into a plan."""
        if key == FINAL_KEY:
            return cls()
        return cls(tuple(parse_delay(step) for step in key.split("-")))

    @property
    def key(self) -> str:
        """Routing key naming this plan; ``final`` when no retry is left."""
        if not self.delays_ms:
            return FINAL_KEY
        return "-".join(format_delay(ms) for ms in self.delays_ms)

    @property
    def spent(self) -> bool:
        """True when the next failure is the last one."""
        return not self.delays_ms

    def rest(self) -> RetryPlan:
        """The plan after the first retry has been taken."""
        return RetryPlan(self.delays_ms[1:])

    def suffixes(self) -> Iterator[RetryPlan]:
        """Every non-empty plan this one passes through, itself first."""
        plan = self
        while not plan.spent:
            yield plan
            plan = plan.rest()

    def timeline_ms(self) -> list[int]:
        """Start of every attempt relative to the first, in milliseconds."""
        starts = [0]
        for delay in self.delays_ms:
            starts.append(starts[-1] + delay)
        return starts


@lru_cache(maxsize=1024)
def is_retry_key(key: str) -> bool:
    """True when ``key`` is a retry plan the DLX can route (``final`` is not)."""
    try:
        return not RetryPlan.from_key(key).spent
    except PlanError:
        return False


def task_plan(
    schedule: str | None,
    *,
    default: RetryPlan,
    override: RetryPlan | None = None,
    schedule_plans: Mapping[str, RetryPlan] | None = None,
) -> RetryPlan:
    """The plan a task is (re)published with: the override, else its schedule's, else the
    default. Replays and adopted hand-published tasks both choose so."""
    if override is not None:
        return override
    if schedule is not None and schedule_plans and schedule in schedule_plans:
        return schedule_plans[schedule]
    return default


@lru_cache(maxsize=1024)
def _exponential(retries: int, delay_ms: int, multiplier: float, cap: int) -> RetryPlan:
    # One plan object for every schedule with the same plan: a million schedules on the
    # default plan held a million copies of it (200 bytes each).
    return RetryPlan(tuple(min(round(delay_ms * multiplier**n), cap) for n in range(retries)))
