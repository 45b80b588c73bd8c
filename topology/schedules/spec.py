"""One ``[[schedule]]`` table as written in the schedules file, field by field."""

from __future__ import annotations

from datetime import UTC, date, datetime, tzinfo
from typing import Any, Literal

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationInfo,
    field_validator,
    model_validator,
)

from warren_cron.clock import utc_text
from warren_cron.durations import parse_ms
from warren_cron.envelope import TaskName
from warren_cron.errors import PermanentError
from warren_cron.flowlimits import FlowLimits
from warren_cron.jsonvalue import check_depth
from warren_cron.plan import MAX_DELAY_MS, RetryPlan
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.timing import cron_timing, load_zone, parse_interval
from warren_cron.webhook import parse_request

Concurrency = Literal["Allow", "Forbid", "Replace"]
CatchUp = Literal["skip", "latest", "all"]
DEFAULT_GRACE_SECONDS = 3600.0
#: ``runs`` is turned into the time of the last fire by counting fires from ``start_at`` (or,
#: without one, from the schedule's creation or the last change of its timing).
MAX_RUNS = 1000
#: The fields that say when a schedule fires: a change of one of them makes the schedule
#: new as far as its fires go (none owed before the change, ``runs`` counted anew).
TIMING_FIELDS = ("cron", "every", "timezone", "start_at", "stop_at", "runs", "jitter", "exclude")
MAX_EXCLUDED = 1000
#: A delay longer than this is a different schedule, not jitter.
MAX_JITTER = "1h"
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


class RetrySpec(BaseModel):
    """A schedule's own retry plan; unset fields fall back to the CRON_* defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_retries: int | None = Field(None, ge=0, le=50)
    delay_ms: int | None = Field(None, ge=0, le=MAX_DELAY_MS)
    multiplier: float | None = Field(None, ge=1.0, le=100.0)
    max_delay_ms: int | None = Field(None, ge=0, le=MAX_DELAY_MS)

    def plan(self, defaults: CronSettings) -> RetryPlan:
        """The plan with this block's values over the defaults."""
        return RetryPlan.exponential(
            defaults.max_retries if self.max_retries is None else self.max_retries,
            defaults.retry_delay_ms if self.delay_ms is None else self.delay_ms,
            self.multiplier or defaults.retry_delay_multiplier,
            defaults.retry_max_delay_ms if self.max_delay_ms is None else self.max_delay_ms,
        )


def check_name(value: str) -> str:
    """``value`` when it can name a schedule; else ValueError saying what a name is."""
    if not (0 < len(value) <= 100 and set(value) <= _NAME_CHARS and value[0].isalnum()):
        raise ValueError(
            f"{value[:100]!r}: use 1-100 letters, digits, '_', '.' or '-', starting with a "
            "letter or digit (the name is part of run ids and queue names)"
        )
    return value


class ScheduleSpec(BaseModel):
    """One ``[[schedule]]`` table as written in the file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    cron: str | None = None
    every: str | None = None
    timezone: str | None = None
    task: TaskName
    payload: JsonValue = None
    timeout_seconds: float | None = Field(None, gt=0)
    retry: RetrySpec | None = None
    concurrency: Concurrency = "Allow"
    #: Fleet-wide limits of this schedule's runs: attempts at once and starts per period.
    limits: FlowLimits | None = None
    catch_up: CatchUp = "latest"
    misfire_grace_seconds: float = Field(DEFAULT_GRACE_SECONDS, ge=0)
    enabled: bool = True
    start_at: datetime | None = None
    stop_at: datetime | None = None
    #: The monitor alerts when no run succeeded for this long (``26h``).
    expect_success_within: str | None = None
    #: Stop after this many fires, counted from ``start_at`` (without one: from the schedule's
    #: creation, or the last change of its timing); then the schedule is completed.
    runs: int | None = Field(None, ge=1, le=MAX_RUNS)
    #: Each fire waits a delay up to this bound, the same for a given run id everywhere.
    jitter: str | None = None
    #: Dates (``YYYY-MM-DD``, in the schedule's zone) on which it does not fire.
    exclude: tuple[date, ...] = Field((), max_length=MAX_EXCLUDED)
    #: Paused by the monitor when a run fails for good, with the failure as the reason.
    pause_on_failure: bool = False

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        return check_name(value)

    @field_validator("cron")
    @classmethod
    def _check_cron(cls, value: str | None) -> str | None:
        if value is not None:
            cron_timing(value)
        return value

    @field_validator("every")
    @classmethod
    def _check_every(cls, value: str | None) -> str | None:
        if value is not None:
            parse_interval(value)
        return value

    @field_validator("expect_success_within")
    @classmethod
    def _check_expect(cls, value: str | None) -> str | None:
        if value is not None and not parse_ms(value, ("s", "m", "h", "d")):
            raise ValueError(f"{value!r}: give a duration like 90m, 26h or 2d (units s, m, h, d)")
        return value

    @field_validator("jitter")
    @classmethod
    def _check_jitter(cls, value: str | None) -> str | None:
        bound = parse_ms(MAX_JITTER) or 0
        if value is not None and not 0 < (parse_ms(value, ("s", "m", "h")) or 0) <= bound:
            raise ValueError(f"{value!r}: give a delay like 30s or 5m, at most {MAX_JITTER}")
        return value

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str | None) -> str | None:
        if value is not None:
            load_zone(value)
        return value

    @field_validator("payload", mode="before")
    @classmethod
    def _shallow_payload(cls, value: object) -> object:
        # Before pydantic walks it: its walk of a deep value ends in an error as deep.
        return check_depth(value)

    @field_validator("payload")
    @classmethod
    def _check_payload(cls, value: JsonValue, info: ValidationInfo) -> JsonValue:
        if info.data.get("task") == "http":
            try:
                parse_request(value)
            except PermanentError as error:
                raise ValueError(str(error)) from None
        return value

    @model_validator(mode="after")
    def _check_combination(self) -> ScheduleSpec:
        if (self.cron is None) == (self.every is None):
            raise ValueError("cron, every: give exactly one of them")
        if self.every is not None and self.timezone is not None:
            raise ValueError("timezone: applies to cron schedules only; intervals run in UTC")
        start, stop = self.bounds()
        if start is not None and stop is not None and stop <= start:
            raise ValueError(f"stop_at: {utc_text(stop)} is not after start_at {utc_text(start)}")
        if self.every is not None and self.jitter_ms >= (parse_ms(self.every) or 0):
            raise ValueError(f"jitter: {self.jitter} must be shorter than every = {self.every}")
        return self

    def timing_key(self) -> tuple[object, ...]:
        """The fields of ``TIMING_FIELDS`` and ``enabled``: equal when two specs fire alike."""
        return (*(getattr(self, name) for name in TIMING_FIELDS), self.enabled)

    @property
    def jitter_ms(self) -> int:
        """``jitter`` in milliseconds; 0 without one."""
        return (parse_ms(self.jitter) or 0) if self.jitter else 0

    @property
    def zone(self) -> tzinfo:
        """Time zone of the cron expression and of local ``start_at``/``stop_at``."""
        return load_zone(self.timezone) if self.timezone else UTC

    @property
    def expect_success_seconds(self) -> float | None:
        """``expect_success_within`` in seconds; None when the schedule sets none."""
        if self.expect_success_within is None:
            return None
        return (parse_ms(self.expect_success_within) or 0) / 1000

    def bounds(self) -> tuple[datetime | None, datetime | None]:
        """``start_at`` and ``stop_at`` as UTC; local times are read in the schedule's zone."""
        return _aware(self.start_at, self.zone), _aware(self.stop_at, self.zone)


def _aware(moment: datetime | None, zone: tzinfo) -> datetime | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return moment.astimezone(UTC)


def spec_json(spec: ScheduleSpec) -> dict[str, Any]:
    """The spec as JSON, fields left at their defaults left out."""
    return spec.model_dump(mode="json", exclude_defaults=True)


def json_bytes(value: Any) -> bytes:
    """``value`` as JSON, in bytes of its own size: orjson returns each result in a buffer
    of at least 4 KB, which a copy kept for long (a million of them) must not hold on to."""
    return bytes(memoryview(orjson.dumps(value)))
