"""One validated schedule: when it fires, the run id of each fire, and the task it publishes."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
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
    #: No fire after this: ``stop_at``, or the last of ``runs`` fires, whichever is first.
    end: datetime | None = None
    excluded: frozenset[date] = frozenset()

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
        while fire is not None and self.excluded and self.local_date(fire) in self.excluded:
            fire = self.timing.next_after(self._day_end(fire))
        if fire is None or (self.end is not None and fire > self.end):
            return None
        return fire

    def completed(self, now: datetime) -> bool:
        """True once the last fire ``stop_at`` or ``runs`` allows is past: it never fires again."""
        return self.end is not None and self.end <= now and self.next_fire(now) is None

    def local_date(self, fire: datetime) -> date:
        """The date of ``fire`` in the schedule's zone (UTC for intervals): what ``exclude``
        names."""
        return fire.astimezone(self.spec.zone).date()

    def _day_end(self, fire: datetime) -> datetime:
        following = self.local_date(fire) + timedelta(days=1)
        return datetime.combine(following, time(), self.spec.zone).astimezone(fire.tzinfo) - _TICK

    def delay(self, run_id: str) -> timedelta:
        """The jitter of one fire: a function of its run id alone, so every scheduler that
        publishes it waits the same delay (and a failover never publishes it twice)."""
        bound = self.spec.jitter_ms
        if not bound:
            return timedelta()
        digest = hashlib.sha256(run_id.encode()).digest()
        return timedelta(milliseconds=int.from_bytes(digest[:8], "big") % (bound + 1))

    def due(self, fire: datetime) -> datetime:
        """When ``fire`` is published: its time plus its jitter."""
        return fire + self.delay(self.run_id(fire)) if self.spec.jitter else fire

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
            limits=self.spec.limits,
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
    excluded = frozenset(spec.exclude)
    built = Schedule(spec, timing, plan, start, stop, _routing_key(plan), grace, stop, excluded)
    return _limit_runs(built) if spec.runs is not None else built


def _limit_runs(schedule: Schedule) -> Schedule:
    # The n-th fire from start_at is a time every scheduler computes alike, so the count
    # survives failover without a counter anywhere: ``runs`` is a computed ``stop_at``.
    assert schedule.start_at is not None and schedule.spec.runs is not None  # validated
    fires = schedule.fires(schedule.start_at - _TICK, schedule.spec.runs)
    if len(fires) < schedule.spec.runs:
        return schedule
    return dataclasses.replace(schedule, end=fires[-1])


@lru_cache(maxsize=1024)
def _routing_key(plan: RetryPlan) -> str:
    # Spelling a key costs microseconds; a file of 100,000 schedules shares a few plans.
    return plan.key
