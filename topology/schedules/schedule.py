"""One validated schedule: when it fires, the run id of each fire, and the task it publishes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from warren_cron.clock import utc_text
from warren_cron.envelope import Envelope
from warren_cron.history.events import EventType, event
from warren_cron.plan import RetryPlan
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.schedules.timing import EPOCH, IntervalTiming, Timing, cron_timing, parse_interval

_TICK = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class Schedule:
    """A validated schedule: its timing parsed once, its retry plan resolved."""

    spec: ScheduleSpec
    timing: Timing
    plan: RetryPlan
    start_at: datetime | None
    stop_at: datetime | None
    #: The plan's routing key, spelled once.
    routing_key: str
    #: ``misfire_grace_seconds`` as a duration.
    grace: timedelta

    @property
    def name(self) -> str:
        """The schedule's unique name."""
        return self.spec.name

    def next_fire(self, after: datetime) -> datetime | None:
        """The first fire strictly after ``after``, within ``start_at``/``stop_at``."""
        if not self.spec.enabled:
            return None
        if self.start_at is not None and after < self.start_at:
            after = self.start_at - _TICK
        fire = self.timing.next_after(after)
        if fire is None or (self.stop_at is not None and fire > self.stop_at):
            return None
        return fire

    def fires(self, after: datetime, count: int) -> list[datetime]:
        """Up to ``count`` fires after ``after``, in order."""
        result: list[datetime] = []
        while len(result) < count and (fire := self.next_fire(after)) is not None:
            result.append(fire)
            after = fire
        return result

    def run_id(self, fire: datetime) -> str:
        """Deterministic id of one fire: ``<name>@<UTC ISO fire time>``."""
        return f"{self.name}@{utc_text(fire)}"

    def manual_run_id(self, now: datetime) -> str:
        """Id of a run triggered by hand: ``<name>@manual-<UTC time>``."""
        return f"{self.name}@manual-{utc_text(now)}"

    def event(
        self, kind: EventType, run_id: str, scheduled_for: str, **fields: Any
    ) -> dict[str, Any]:
        """A history event of one run of this schedule (``fired``, ``triggered``, ``skipped``)."""
        return event(
            kind,
            run_id=run_id,
            schedule=self.name,
            task=self.spec.task,
            scheduled_for=scheduled_for,
            **fields,
        )

    def envelope(self, fire: datetime, run_id: str | None = None) -> Envelope:
        """The task message of one fire (of a run triggered by hand: with its ``run_id``)."""
        return Envelope(
            task=self.spec.task,
            payload=self.spec.payload,
            run_id=run_id or self.run_id(fire),
            schedule=self.name,
            scheduled_for=fire,
            timeout_seconds=self.spec.timeout_seconds,
            concurrency=self.spec.concurrency,
        )


def build_schedule(
    spec: ScheduleSpec, defaults: CronSettings, default_plan: RetryPlan | None = None
) -> Schedule:
    """Resolve a valid spec: timing, bounds and retry plan (``default_plan`` if it has none)."""
    start, stop = spec.bounds()
    timing: Timing
    if spec.cron is not None:
        timing = cron_timing(spec.cron, spec.timezone or "UTC")
    else:
        assert spec.every is not None  # the spec holds exactly one of cron and every
        timing = IntervalTiming(parse_interval(spec.every), start or EPOCH)
    plan = spec.retry.plan(defaults) if spec.retry else default_plan or defaults.default_plan()
    grace = timedelta(seconds=spec.misfire_grace_seconds)
    return Schedule(spec, timing, plan, start, stop, _routing_key(plan), grace)


@lru_cache(maxsize=1024)
def _routing_key(plan: RetryPlan) -> str:
    # Spelling a key costs microseconds; a file of 100,000 schedules shares a few plans.
    return plan.key
