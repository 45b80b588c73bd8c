"""Specs read back from a snapshot, built without validating each one again.

A snapshot holds specs that warren validated when they were written (``spec_json`` of a
``ScheduleSpec``), so a new leader need not run every validator again: for 100,000
schedules the full validation (the webhook URL check above all) takes seconds, the
construction here a fraction. It still checks what could crash a scheduler or mislead it:
every field is one the spec knows, of the JSON type that field is written as; exactly one
of ``cron`` and ``every``; the cron expression, interval and time zone parse (each spelling
once, cached). Whatever does not fit that shape is validated in full, so a spec of another
shape is refused with the validator's own words, and ``decode_snapshot`` names it.
"""

from __future__ import annotations

from datetime import date, datetime
from types import NoneType
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from warren_cron.errors import validation_problems
from warren_cron.flowlimits import FlowLimits
from warren_cron.schedules.spec import RetrySpec, ScheduleSpec
from warren_cron.schedules.timing import cron_timing, load_zone, parse_interval

M = TypeVar("M", ScheduleSpec, RetrySpec)
_TEXT = (str, NoneType)
_NUMBER = (int, float, NoneType)
#: Each field's JSON types, as ``spec_json`` writes it; a field missing here is validated
#: in full (tests/test_store_snapshot.py checks that this names every field of the spec).
PLAIN: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "cron": _TEXT,
    "every": _TEXT,
    "timezone": _TEXT,
    "task": (str,),
    "payload": (dict, list, str, int, float, bool, NoneType),
    "timeout_seconds": _NUMBER,
    "concurrency": (str,),
    "catch_up": (str,),
    "misfire_grace_seconds": (int, float),
    "enabled": (bool,),
    "expect_success_within": _TEXT,
    "runs": (int, NoneType),
    "jitter": _TEXT,
    "pause_on_failure": (bool,),
}
#: Fields whose JSON spelling is not their Python value: read by their own adapter.
ADAPTED: dict[str, TypeAdapter[Any]] = {
    "start_at": TypeAdapter(datetime | None),
    "stop_at": TypeAdapter(datetime | None),
    "exclude": TypeAdapter(tuple[date, ...]),
    # Validated in full: few schedules have limits, and their rules are parsed here.
    "limits": TypeAdapter(FlowLimits | None),
}
#: Every field's default: all are immutable values (no factory), shared safely.
DEFAULTS: dict[str, Any] = {
    name: field.default for name, field in ScheduleSpec.model_fields.items()
}
RETRY_DEFAULTS: dict[str, Any] = {
    name: field.default for name, field in RetrySpec.model_fields.items()
}
_FLOATS = ("timeout_seconds", "misfire_grace_seconds")
_CHOICES = {"concurrency": ("Allow", "Forbid", "Replace"), "catch_up": ("skip", "latest", "all")}


def trusted_spec(name: str, data: Any) -> ScheduleSpec:
    """The spec a snapshot holds for ``name``; ``ValueError`` (pydantic's, when the shape
    is not warren's) naming what is wrong."""
    if not _plain_shape(name, data):
        try:  # another shape: the validators say why, without showing values (secrets)
            spec = ScheduleSpec.model_validate(data)
        except ValidationError as error:
            raise ValueError("; ".join(validation_problems(error))) from None
        if spec.name != name:
            raise ValueError(f"{name}: the spec is named {spec.name!r}")
        return spec
    try:
        fields = {
            key: ADAPTED[key].validate_python(v) if key in ADAPTED else v for key, v in data.items()
        }
    except ValidationError as error:
        raise ValueError("; ".join(validation_problems(error))) from None
    if fields.get("retry") is not None:
        fields["retry"] = _retry(fields["retry"])
    for key in _FLOATS:
        if fields.get(key) is not None:
            fields[key] = float(fields[key])
    _check_timing(fields)
    return _made(ScheduleSpec, DEFAULTS, fields)


def _plain_shape(name: str, data: Any) -> bool:
    if not isinstance(data, dict) or data.get("name") != name:
        return False
    for key, value in data.items():
        types = PLAIN.get(key)
        if key == "retry":
            if not _retry_shape(value):
                return False
        elif types is None:
            if key not in ADAPTED:
                return False
        elif not isinstance(value, types) or (key in _CHOICES and value not in _CHOICES[key]):
            return False
    return (data.get("cron") is None) != (data.get("every") is None) and "task" in data


def _retry_shape(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, dict) and all(
        key in RETRY_DEFAULTS and isinstance(number, int | float | None)
        for key, number in value.items()
    )


def _retry(value: dict[str, Any]) -> RetrySpec:
    given = {
        key: float(v) if key == "multiplier" and v is not None else v for key, v in value.items()
    }
    return _made(RetrySpec, RETRY_DEFAULTS, given)


def _made(model: type[M], defaults: dict[str, Any], given: dict[str, Any]) -> M:
    # What ``model_construct`` does for a model without aliases, extras, private attributes
    # or post-init (the snapshot tests compare the result with validated specs), at a
    # third of its cost: it walks every field of the model for every instance.
    made = model.__new__(model)
    object.__setattr__(made, "__dict__", {**defaults, **given})
    object.__setattr__(made, "__pydantic_fields_set__", set(given))
    object.__setattr__(made, "__pydantic_extra__", None)
    object.__setattr__(made, "__pydantic_private__", None)
    return made


def _check_timing(fields: dict[str, Any]) -> None:
    # What ``build_schedule`` parses: a spelling it cannot read must not reach a leader.
    if fields.get("cron") is not None:
        cron_timing(fields["cron"], fields.get("timezone") or "UTC")
    else:
        parse_interval(fields["every"])
    if fields.get("timezone") is not None:
        load_zone(fields["timezone"])
