"""What an enqueue asks for, checked and turned into an envelope before anything is sent."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypedDict

from pydantic import ValidationError

from warren_cron.delay import MAX_DELAY_SECONDS, seconds_until
from warren_cron.envelope import Envelope, check_task, one_off_run_id
from warren_cron.errors import EnqueueError, validation_problems
from warren_cron.jsonvalue import check_depth
from warren_cron.plan import RetryPlan

#: Longest idempotency key: it becomes part of the run id, which the envelope caps at 500.
MAX_KEY_LENGTH = 200


class EnqueueOptions(TypedDict, total=False):
    """Keyword arguments of ``Client.enqueue``; all optional."""

    #: When the task is due (timezone-aware); a time in the past means now.
    at: datetime
    #: How long from now the task is due, as a timedelta or seconds.
    delay: timedelta | float
    #: The retry plan (or its key, e.g. ``"30s-1m-2m"``); else the CRON_* default.
    plan: RetryPlan | str
    #: Per-attempt timeout in seconds; else the worker's CRON_TASK_TIMEOUT_SECONDS.
    timeout: float
    #: Past ``now + ttl`` the task is not run (nor retried) but failed with reason ``expired``.
    ttl: timedelta | float
    #: The same as ``ttl``, as a timezone-aware time.
    deadline: datetime
    #: Idempotency key: the same key gives the same run id, and only its first enqueue sends.
    key: str


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What an enqueue did: the task's run id, when it is due, and whether this call sent it."""

    run_id: str
    #: When the task is due; None when nothing was sent (``created`` is False).
    due: datetime | None
    #: False when an earlier enqueue used the same idempotency key: this one sent nothing.
    created: bool = True


def seconds(value: timedelta | float, name: str) -> float:
    """A duration argument in seconds; negative, endless or longer ones than the delay levels
    hold are refused, naming the argument."""
    total = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if math.isnan(total) or total < 0:
        raise EnqueueError(f"{name} must not be negative, got {total:g} s")
    # Longer is no time a task can wait for, and past a datetime's range besides.
    if total > MAX_DELAY_SECONDS:
        raise EnqueueError(
            f"{name} of {total:g} s is beyond the longest delay, {MAX_DELAY_SECONDS} s "
            "(~8.5 years): give a shorter one"
        )
    return total


def aware(value: datetime, name: str) -> datetime:
    """A time argument, refused when it has no time zone (its instant would be a guess)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise EnqueueError(f"{name} must be timezone-aware, e.g. datetime.now(UTC) + ...")
    return value


def due_time(options: EnqueueOptions, now: datetime) -> datetime:
    """When the task is due: ``at`` or ``now + delay``, never before now nor past the levels."""
    if "at" in options and "delay" in options:
        raise EnqueueError("give at or delay, not both")
    due = now
    if "at" in options:
        due = max(aware(options["at"], "at"), now)
    elif "delay" in options:
        due = now + timedelta(seconds=seconds(options["delay"], "delay"))
    if seconds_until(due, now) > MAX_DELAY_SECONDS:
        raise EnqueueError(f"the task is due at {due}, beyond the longest delay (~8.5 years)")
    return due


def deadline_of(options: EnqueueOptions, now: datetime, due: datetime) -> datetime | None:
    """The time past which the task is not run: ``deadline`` or ``now + ttl``."""
    if "ttl" in options and "deadline" in options:
        raise EnqueueError("give ttl or deadline, not both")
    if "ttl" in options:
        deadline = now + timedelta(seconds=seconds(options["ttl"], "ttl"))
    elif "deadline" in options:
        deadline = aware(options["deadline"], "deadline")
    else:
        return None
    if deadline < due:
        raise EnqueueError(f"the task would expire at {deadline}, before it is due at {due}")
    return deadline


def run_id_of(task: str, options: EnqueueOptions, now: datetime) -> str:
    """``key:<key>`` for an idempotency key (the same key, the same run), else a fresh id."""
    key = options.get("key")
    if key is None:
        return one_off_run_id(task, now)
    if not 0 < len(key) <= MAX_KEY_LENGTH or not key.isprintable():
        raise EnqueueError(f"key must be 1 to {MAX_KEY_LENGTH} printable characters")
    return f"key:{key}"


def one_off(task: str, payload: Any, options: EnqueueOptions, now: datetime) -> Envelope:
    """The envelope of a one-off task, or ``EnqueueError`` naming what is wrong."""
    try:
        check_task(task)
    except ValueError as error:
        raise EnqueueError(f"task: {error}") from None
    try:
        check_depth(payload)
    except ValueError as error:
        raise EnqueueError(f"payload: {error}") from None
    due = due_time(options, now)
    try:
        return Envelope(
            task=task,
            payload=payload,
            run_id=run_id_of(task, options, now),
            scheduled_for=due,
            timeout_seconds=options.get("timeout"),
            deadline=deadline_of(options, now, due),
        )
    except ValidationError as error:
        raise EnqueueError("; ".join(validation_problems(error))) from None


def plan_of(options: EnqueueOptions, default: RetryPlan) -> RetryPlan:
    """The plan asked for (a plan or its key), else ``default``."""
    plan = options.get("plan", default)
    return RetryPlan.from_key(plan) if isinstance(plan, str) else plan
