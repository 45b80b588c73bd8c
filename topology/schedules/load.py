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
    exclude = ["2026-12-24", "holidays"]   # dates, or calendars of [calendars], not fired on

    [calendars]
    holidays = ["2026-12-25", "2027-01-01"]

A calendar's name in ``exclude`` stands for its dates: the schedule holds the dates.

Every problem of the file is reported at once, each naming the schedule and the field. Each
entry that validates becomes a ``Schedule`` (``topology/schedules/schedule.py``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from warren_cron.errors import Loc, PlanError, ScheduleError, validation_problems
from warren_cron.jsonvalue import MAX_DEPTH
from warren_cron.plan import RetryPlan
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.schedule import Schedule, build_schedule
from warren_cron.schedules.spec import RetrySpec, ScheduleSpec

_JSON_TAGS = frozenset({"dict", "list", "str", "int", "float", "bool"})


@dataclass(frozen=True, slots=True)
class ScheduleSet:
    """Every schedule of one file, in file order."""

    source: str
    schedules: tuple[Schedule, ...]

    def get(self, name: str) -> Schedule | None:
        """The schedule called ``name``, if any."""
        return next((s for s in self.schedules if s.name == name), None)

    def compact(self) -> ScheduleSet:
        """The same schedules holding their specs as JSON bytes (what a scheduler keeps)."""
        return ScheduleSet(self.source, tuple(s.compact() for s in self.schedules))

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

    No file where ``CRON_SCHEDULES_FILE`` points (named or the default ``schedules.toml``)
    only means no schedules of the file's: every schedule may live in the store. A file that
    exists but is invalid raises ``ScheduleError``.
    """
    path = settings.schedules_file
    return load_schedules(path, settings) if path.exists() else None


def file_or_none(path: Path, settings: CronSettings) -> ScheduleSet:
    """The file's schedules, or none (an empty set) when there is no file at ``path``; a file
    that exists but is invalid raises ``ScheduleError``."""
    if not path.exists():
        return ScheduleSet(str(path), ())
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
    except RecursionError:  # tomllib reads nested arrays and tables by recursion
        why = f"not readable: arrays or tables nested too deep; flatten them (at most {MAX_DEPTH})"
        raise ScheduleError(source, [why]) from None
    entries = _entries(data, source)
    problems: list[str] = []
    calendars = _calendars(data.get("calendars", {}), problems)
    schedules = [s for s in _build_all(entries, defaults, calendars, problems) if s is not None]
    problems += _duplicates(entries)
    if problems:
        raise ScheduleError(source, problems)
    return ScheduleSet(source, tuple(schedules))


def _entries(data: Mapping[str, Any], source: str) -> list[Any]:
    unknown = sorted(set(data) - {"schedule", "calendars"})
    if unknown:
        raise ScheduleError(
            source, [f"unknown top-level key(s) {unknown}: write each schedule as [[schedule]]"]
        )
    entries = data.get("schedule", [])
    if not isinstance(entries, list):
        raise ScheduleError(source, ["'schedule' must be an array of tables: use [[schedule]]"])
    return entries


def _calendars(data: Any, problems: list[str]) -> dict[str, list[Any]]:
    """The ``[calendars]`` table: a list of dates by name."""
    if not isinstance(data, dict):
        problems.append('calendars: write [calendars] with name = ["2026-12-25", ...]')
        return {}
    wrong = sorted(name for name, dates in data.items() if not isinstance(dates, list))
    problems += [f'calendars.{name}: give a list of dates, e.g. ["2026-12-25"]' for name in wrong]
    return {name: dates for name, dates in data.items() if isinstance(dates, list)}


def with_calendars(raw: Any, calendars: dict[str, list[Any]]) -> Any:
    """The entry with each calendar's name in its ``exclude`` replaced by the dates."""
    if not isinstance(raw, dict) or not isinstance(raw.get("exclude"), list):
        return raw
    dates: list[Any] = []
    for item in raw["exclude"]:
        dates += calendars.get(item, [item]) if isinstance(item, str) else [item]
    return {**raw, "exclude": dates}


def _build_all(
    entries: list[Any],
    defaults: CronSettings,
    calendars: dict[str, list[Any]],
    problems: list[str],
) -> list[Schedule | None]:
    built: list[Schedule | None] = []
    shared = _Shared(defaults)
    for index, raw in enumerate(entries, start=1):
        label = _label(raw, index)
        try:
            spec = ScheduleSpec.model_validate(with_calendars(raw, calendars))
            built.append(_resolve(spec, shared))
        except ValidationError as error:
            problems += [f"{label}: {line}" for line in spec_problems(error)]
            built.append(None)
        except _EntryError as error:
            problems.append(f"{label}: {error}")
            built.append(None)
    return built


class _EntryError(ValueError):
    """A problem found after the fields themselves validated."""


#: A spec resolved, or ``ValueError`` naming what is wrong.
Resolve = Callable[[ScheduleSpec], Schedule]


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


def resolve_one(spec: ScheduleSpec, defaults: CronSettings) -> Schedule:
    """One spec resolved as each entry of a file is; ``ValueError`` names what is wrong."""
    return _resolve(spec, _Shared(defaults))


def resolver(defaults: CronSettings) -> Resolve:
    """``resolve_one`` for many specs at one moment, as a file's entries are resolved:
    specs sharing a cron timing ask croniter once (thousands of creates in one call)."""
    shared = _Shared(defaults)
    return lambda spec: _resolve(spec, shared)


def _label(raw: Any, index: int) -> str:
    name = raw.get("name") if isinstance(raw, dict) else None
    return f"schedule {name!r} (#{index})" if isinstance(name, str) else f"schedule #{index}"


def _where(loc: Loc) -> str:
    # JsonValue errors carry the union branch ("dict", "list") in the location.
    return ".".join(str(p) for p in loc if loc[0] != "payload" or p not in _JSON_TAGS)


def _what(item: ErrorDetails) -> str:
    message = item["msg"].removeprefix("Value error, ")
    if item["loc"][:1] == ("exclude",) and item["type"].startswith("date"):
        message = "neither a date (2026-12-25) nor a name of the file's [calendars]"
    if item["type"] == "invalid-json-value":
        message += " (TOML dates and times are not JSON: write them as strings)"
    if item["type"] == "extra_forbidden":
        message = f"unknown field; known fields: {', '.join(_known(item['loc']))}"
    return message


def spec_problems(error: ValidationError) -> list[str]:
    """One line per problem of a spec that did not validate, naming the field and the fix."""
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
