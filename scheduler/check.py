"""``warren scheduler --check``: what each schedule will do, before it does it."""

from __future__ import annotations

import itertools
from datetime import datetime

from warren_cron.clock import utc_text
from warren_cron.plan import RetryPlan
from warren_cron.scheduler.settings import SchedulerSettings
from warren_cron.schedules.load import ScheduleSet
from warren_cron.schedules.schedule import Schedule
from warren_cron.schedules.timing import CronTiming, format_duration

FIRES_SHOWN = 5


def report(schedules: ScheduleSet, settings: SchedulerSettings, now: datetime) -> str:
    """The whole report: a header, then one block per schedule."""
    count = len(schedules.schedules)
    lines = [f"{schedules.source}: {count} schedule(s), valid", ""]
    for schedule in schedules.schedules:
        lines += describe(schedule, settings, now)
        lines.append("")
    return "\n".join(lines)


def describe(schedule: Schedule, settings: SchedulerSettings, now: datetime) -> list[str]:
    """One schedule: how it fires, its next fires, its retry timeline."""
    spec = schedule.spec
    timeout = spec.timeout_seconds or settings.task_timeout_seconds
    lines = [
        f"{spec.name}: {schedule.timing.describe()}, task {spec.task!r}"
        + ("" if spec.enabled else "  [disabled]"),
        f"  concurrency {spec.concurrency}, catch_up {spec.catch_up} within "
        f"{format_duration(spec.misfire_grace_seconds)}, timeout {format_duration(timeout)}",
    ]
    fires = schedule.fires(now, FIRES_SHOWN)
    lines += [f"  next: {_when(schedule, fire)}" for fire in fires] or [_no_fire(schedule)]
    worst = worst_case_seconds(schedule.plan, timeout)
    lines += timeline(schedule.plan, timeout)
    lines += _overlap_note(schedule, fires, worst)
    return lines


def timeline(plan: RetryPlan, timeout: float) -> list[str]:
    """Attempt start times of the plan and the worst-case duration of one fire."""
    starts = ", ".join(
        f"#{n} +{format_duration(ms / 1000)}" for n, ms in enumerate(plan.timeline_ms(), 1)
    )
    attempts = len(plan.delays_ms) + 1
    worst = worst_case_seconds(plan, timeout)
    return [
        f"  retries: plan {plan.key}: attempts at {starts}",
        f"  worst case: {format_duration(sum(plan.delays_ms) / 1000)} of delays + "
        f"{attempts} x {format_duration(timeout)} timeout = {format_duration(worst)}",
    ]


def worst_case_seconds(plan: RetryPlan, timeout: float) -> float:
    """From the first attempt's start to the last attempt's timeout."""
    return sum(plan.delays_ms) / 1000 + (len(plan.delays_ms) + 1) * timeout


def _when(schedule: Schedule, fire: datetime) -> str:
    if isinstance(schedule.timing, CronTiming) and schedule.timing.zone.key != "UTC":
        local = fire.astimezone(schedule.timing.zone)
        return f"{utc_text(fire)}  ({local:%Y-%m-%d %H:%M %Z})"
    return utc_text(fire)


def _no_fire(schedule: Schedule) -> str:
    if not schedule.spec.enabled:
        return "  next: none, disabled (enabled = false)"
    return "  next: none, stop_at has passed"


def _overlap_note(schedule: Schedule, fires: list[datetime], worst: float) -> list[str]:
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(fires)]
    if schedule.spec.concurrency != "Allow" or not gaps or worst <= min(gaps):
        return []
    return [
        f"  note: one fire can run for up to {format_duration(worst)}, longer than the "
        f"{format_duration(min(gaps))} between fires; runs may overlap "
        '(set concurrency = "Forbid" or "Replace" to prevent it)'
    ]
