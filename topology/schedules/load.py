"""The schedules file: TOML, validated whole before anything runs.

::

    [[schedule]]
    name = "nightly-report"          # unique; part of run ids and lock queue names
    cron = "30 2 * * *"              # or: every = "5m" (anchored interval)
    timezone = "Europe/Berlin"       # cron only; default UTC
    task = "http"
    payload = { url = "https://reports.internal/run" }
    timeout_seconds = 120
    concurrency = "Forbid"           # Allow (default), Forbid, Replace
    catch_up = "latest"              # skip, latest (default), all
    misfire_grace_seconds = 3600
    retry = { max_retries = 5, delay_ms = 10000 }   # overrides CRON_* defaults
    expect_success_within = "26h"    # the monitor alerts when no run succeeded for this long

Every problem of the file is reported at once, each naming the schedule and the field.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from topology.envelope import Envelope
from topology.errors import Loc, PlanError, ScheduleError, validation_problems
from topology.plan import RetryPlan
from topology.runtime.settings import CronSettings
from topology.schedules.spec import RetrySpec, ScheduleSpec
from topology.schedules.timing import (
    EPOCH,
    IntervalTiming,
    Timing,
    cron_timing,
    json_time,
    parse_interval,
    utc_text,
)

_TICK = timedelta(microseconds=1)
_JSON_TAGS = frozenset({"dict", "list", "str", "int", "float", "bool"})


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

    def body(self, fire: datetime, run_id: str) -> bytes:
        """``envelope(fire).encode()`` without building the model: the spec was validated."""
        spec = self.spec
        return orjson.dumps(
            {
                "task": spec.task,
                "payload": spec.payload,
                "run_id": run_id,
                "schedule": spec.name,
                "scheduled_for": json_time(fire),
                "timeout_seconds": spec.timeout_seconds,
                "deadline": None,
                "concurrency": spec.concurrency,
            }
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


@dataclass(frozen=True, slots=True)
class ScheduleSet:
    """Every schedule of one file, in file order."""

    source: str
    schedules: tuple[Schedule, ...]

    def get(self, name: str) -> Schedule | None:
        """The schedule called ``name``, if any."""
        return next((s for s in self.schedules if s.name == name), None)

    def plans(self) -> dict[str, RetryPlan]:
        """Retry plan of each schedule by name (replaying a failed fire uses it)."""
        return {s.name: s.plan for s in self.schedules}


def load_schedules(path: Path, defaults: CronSettings) -> ScheduleSet:
    """Read and validate the whole file, or raise ``ScheduleError`` listing every problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ScheduleError(
            str(path),
            [f"cannot read the file ({error}); set CRON_SCHEDULES_FILE to your schedules file"],
        ) from None
    return parse_schedules(text, defaults, str(path))


def configured_schedules(settings: CronSettings) -> ScheduleSet | None:
    """The schedules of ``CRON_SCHEDULES_FILE``; None without a file.

    A file that is missing although ``CRON_SCHEDULES_FILE`` names it is an error; a missing
    default ``schedules.toml`` only means the processes run without schedules of their own.
    """
    path = settings.schedules_file
    if not path.exists() and "schedules_file" not in settings.model_fields_set:
        return None
    return load_schedules(path, settings)


def schedule_plans(settings: CronSettings) -> dict[str, RetryPlan] | None:
    """Each schedule's own retry plan from ``CRON_SCHEDULES_FILE``; None without a file."""
    schedules = configured_schedules(settings)
    return None if schedules is None else schedules.plans()


def parse_schedules(text: str, defaults: CronSettings, source: str = "schedules") -> ScheduleSet:
    """Validate the TOML text of a schedules file."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ScheduleError(source, [f"not valid TOML: {error}"]) from None
    entries = _entries(data, source)
    problems: list[str] = []
    schedules = [s for s in _build_all(entries, defaults, problems) if s is not None]
    problems += _duplicates(entries)
    if problems:
        raise ScheduleError(source, problems)
    return ScheduleSet(source, tuple(schedules))


def _entries(data: Mapping[str, Any], source: str) -> list[Any]:
    unknown = sorted(set(data) - {"schedule"})
    if unknown:
        raise ScheduleError(
            source, [f"unknown top-level key(s) {unknown}: write each schedule as [[schedule]]"]
        )
    entries = data.get("schedule", [])
    if not isinstance(entries, list):
        raise ScheduleError(source, ["'schedule' must be an array of tables: use [[schedule]]"])
    return entries


def _build_all(
    entries: list[Any], defaults: CronSettings, problems: list[str]
) -> list[Schedule | None]:
    built: list[Schedule | None] = []
    shared = _Shared(defaults)
    for index, raw in enumerate(entries, start=1):
        label = _label(raw, index)
        try:
            spec = ScheduleSpec.model_validate(raw)
            built.append(_resolve(spec, shared))
        except ValidationError as error:
            problems += [f"{label}: {line}" for line in _describe(error)]
            built.append(None)
        except _EntryError as error:
            problems.append(f"{label}: {error}")
            built.append(None)
    return built


class _EntryError(ValueError):
    """A problem found after the fields themselves validated."""


class _Shared:
    """What every entry of one file resolves against, worked out once."""

    def __init__(self, defaults: CronSettings) -> None:
        self.defaults = defaults
        # One moment for the whole file: schedules sharing a cron timing answer it once.
        self.now = datetime.now(UTC)
        try:
            self.default_plan: RetryPlan | None = defaults.default_plan()
        except PlanError:
            self.default_plan = None  # each entry without a plan reports it


def _resolve(spec: ScheduleSpec, shared: _Shared) -> Schedule:
    try:
        schedule = build_schedule(spec, shared.defaults, shared.default_plan)
    except PlanError as error:
        raise _EntryError(f"retry: {error}") from None
    if spec.cron is not None and schedule.timing.next_after(shared.now) is None:
        raise _EntryError(f"cron: {spec.cron!r} never fires (no such date)")
    return schedule


def _label(raw: Any, index: int) -> str:
    name = raw.get("name") if isinstance(raw, dict) else None
    return f"schedule {name!r} (#{index})" if isinstance(name, str) else f"schedule #{index}"


def _where(loc: Loc) -> str:
    # JsonValue errors carry the union branch ("dict", "list") in the location.
    return ".".join(str(p) for p in loc if loc[0] != "payload" or p not in _JSON_TAGS)


def _what(item: ErrorDetails) -> str:
    message = item["msg"].removeprefix("Value error, ")
    if item["type"] == "invalid-json-value":
        message += " (TOML dates and times are not JSON: write them as strings)"
    if item["type"] == "extra_forbidden":
        message = f"unknown field; known fields: {', '.join(_known(item['loc']))}"
    return message


def _describe(error: ValidationError) -> list[str]:
    return validation_problems(error, where=_where, what=_what)


def _known(loc: tuple[int | str, ...]) -> list[str]:
    model: type[BaseModel] = RetrySpec if loc[0] == "retry" and len(loc) > 1 else ScheduleSpec
    return list(model.model_fields)


def _duplicates(entries: list[Any]) -> list[str]:
    where: dict[str, list[str]] = {}
    for index, raw in enumerate(entries, start=1):
        name = raw.get("name") if isinstance(raw, dict) else None
        if isinstance(name, str):
            where.setdefault(name, []).append(f"#{index}")
    return [
        f"schedule {name!r}: name: used by {len(found)} schedules ({', '.join(found)}); "
        "names must be unique"
        for name, found in where.items()
        if len(found) > 1
    ]
