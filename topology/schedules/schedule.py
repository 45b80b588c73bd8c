"""One validated schedule: when it fires, the run id of each fire, and the task it publishes."""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import lru_cache
from typing import Any

import orjson

from warren_cron.clock import utc_text
from warren_cron.envelope import Envelope
from warren_cron.history.events import EventType, event
from warren_cron.plan import RetryPlan
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.spec import ScheduleSpec, json_bytes, spec_json
from warren_cron.schedules.timing import EPOCH, IntervalTiming, Timing, cron_timing, parse_interval
from warren_cron.schedules.trusted import trusted_spec

_TICK = timedelta(microseconds=1)


@dataclass(frozen=True, slots=True)
class Schedule:
    """A validated schedule: its timing parsed once, its retry plan resolved; its spec held
    as the spec itself or, compact, as its JSON bytes (decoded when asked for: when the
    schedule fires or changes, not while it waits)."""

    held: ScheduleSpec | bytes
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
    #: Fires are owed from here on: the schedule's creation or the last change of its timing
    #: (None: not known here, no bound). ``runs`` without ``start_at`` counts from it.
    since: datetime | None = None
    #: The schedule's unique name.
    name: str = ""
    #: What the wait for a fire reads of the spec, kept beside it so a compact schedule
    #: is not decoded for it: ``enabled`` and ``jitter_ms``.
    enabled: bool = True
    jitter_ms: int = 0

    @property
    def spec(self) -> ScheduleSpec:
        """The spec (a compact schedule's decoded anew: a few microseconds)."""
        held = self.held
        if isinstance(held, ScheduleSpec):
            return held
        return trusted_spec(self.name, orjson.loads(held))

    def compact(self, held: bytes | None = None) -> Schedule:
        """This schedule holding its spec as JSON bytes (``held``: those bytes, when the
        caller keeps them already)."""
        if isinstance(self.held, bytes):
            return self
        packed = held if held is not None else json_bytes(spec_json(self.held))
        return dataclasses.replace(self, held=packed)

    def next_fire(self, after: datetime) -> datetime | None:
        """The first fire strictly after ``after``, within ``start_at``/``stop_at``, and
        never before ``since``: a fire from before the schedule existed was never owed."""
        if not self.enabled:
            return None
        first = self.owed_start
        if first is not None and after < first:
            after = first - _TICK
        fire = self.timing.next_after(after)
        while fire is not None and self.excluded and self.local_date(fire) in self.excluded:
            fire = self.timing.next_after(self._day_end(fire))
        if fire is None or (self.end is not None and fire > self.end):
            return None
        return fire

    @property
    def owed_start(self) -> datetime | None:
        """The first moment a fire may be at: the later of ``start_at`` and ``since``."""
        if self.since is None or (self.start_at is not None and self.start_at > self.since):
            return self.start_at
        return self.since

    def owed_from(self, since: datetime | None) -> Schedule:
        """This schedule with its fires owed from ``since`` (``runs`` counted from it)."""
        if since == self.since:
            return self
        moved = dataclasses.replace(self, since=since, end=self.stop_at)
        return _limit_runs(moved) if self.spec.runs is not None else moved

    def completed(self, now: datetime) -> bool:
        """True once the last fire ``stop_at`` or ``runs`` allows is past: it never fires again."""
        return self.end is not None and self.end <= now and self.next_fire(now) is None

    def local_date(self, fire: datetime) -> date:
        """The date of ``fire`` in the schedule's zone (UTC for intervals): what ``exclude``
        names."""
        return fire.astimezone(self.spec.zone).date()  # only with ``exclude``: rare

    def _day_end(self, fire: datetime) -> datetime:
        following = self.local_date(fire) + timedelta(days=1)
        return datetime.combine(following, time(), self.spec.zone).astimezone(fire.tzinfo) - _TICK

    def delay(self, run_id: str) -> timedelta:
        """The jitter of one fire: a function of its run id alone, so every scheduler that
        publishes it waits the same delay (and a failover never publishes it twice)."""
        bound = self.jitter_ms
        if not bound:
            return timedelta()
        digest = hashlib.sha256(run_id.encode()).digest()
        return timedelta(milliseconds=int.from_bytes(digest[:8], "big") % (bound + 1))

    def due(self, fire: datetime) -> datetime:
        """When ``fire`` is published: its time plus its jitter."""
        return fire + self.delay(self.run_id(fire)) if self.jitter_ms else fire

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
    spec: ScheduleSpec,
    defaults: CronSettings,
    default_plan: RetryPlan | None = None,
    since: datetime | None = None,
    packed: bytes | None = None,
) -> Schedule:
    """Resolve a valid spec: timing, bounds and retry plan (``default_plan`` if it has none);
    ``since``: when its fires are first owed (its creation, or the last change of its timing);
    ``packed``: the spec's JSON, held instead of the spec (a compact schedule)."""
    start, stop = spec.bounds()
    timing: Timing
    if spec.cron is not None:
        timing = cron_timing(spec.cron, spec.timezone or "UTC")
    else:
        assert spec.every is not None  # the spec holds exactly one of cron and every
        timing = IntervalTiming(parse_interval(spec.every), start or EPOCH)
    plan = spec.retry.plan(defaults) if spec.retry else default_plan or defaults.default_plan()
    grace = _grace(spec.misfire_grace_seconds)
    excluded = frozenset(spec.exclude) if spec.exclude else _NONE_EXCLUDED
    held: ScheduleSpec | bytes = spec if packed is None else packed
    built = Schedule(
        held,
        timing,
        plan,
        start,
        stop,
        _routing_key(plan),
        grace,
        stop,
        excluded,
        since,
        sys.intern(spec.name),  # one copy for the store's key, the heap's and this
        spec.enabled,
        spec.jitter_ms,
    )
    return _limit_runs(built) if spec.runs is not None else built


def _limit_runs(schedule: Schedule) -> Schedule:
    # The n-th fire from start_at (or from the creation the store recorded) is a time every
    # scheduler computes alike, so the count survives failover without a counter anywhere:
    # ``runs`` is a computed ``stop_at``. Neither known (a file schedule read outside the
    # scheduler): no count, the scheduler gives the time before it fires anything.
    assert schedule.spec.runs is not None
    if schedule.start_at is not None:  # counted from it, whenever the schedule was made
        counted = dataclasses.replace(schedule, since=None)
    elif schedule.since is not None:
        counted = schedule
    else:
        return schedule
    assert counted.owed_start is not None
    fires = counted.fires(counted.owed_start - _TICK, schedule.spec.runs)
    if len(fires) < schedule.spec.runs:
        return schedule
    return dataclasses.replace(schedule, end=fires[-1])


#: Shared by every schedule without ``exclude``: an empty frozenset each is 216 bytes.
_NONE_EXCLUDED: frozenset[date] = frozenset()


@lru_cache(maxsize=1024)
def _grace(seconds: float) -> timedelta:
    # One duration for every schedule with the same grace (most keep the default).
    return timedelta(seconds=seconds)


@lru_cache(maxsize=1024)
def _routing_key(plan: RetryPlan) -> str:
    # Spelling a key costs microseconds; a file of 100,000 schedules shares a few plans.
    return plan.key
