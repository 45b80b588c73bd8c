"""Input of a change checked before anything is sent: the spec whole, valid and small.

A spec comes as a ``ScheduleSpec`` or as the JSON (or TOML) table of one ``[[schedule]]``;
an update gives only the fields that change (a field set to None goes back to its default;
a ``cron`` replaces an ``every`` and the other way round).
Every problem is named in one ``InvalidSchedule``, as the schedules file reports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from pydantic import ValidationError

from warren_cron.errors import InvalidSchedule
from warren_cron.jsonvalue import MAX_DEPTH
from warren_cron.schedules.load import spec_problems
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.changes import spec_json

#: The largest spec, as JSON: a change is read by every scheduler and client that follows
#: the log, and a snapshot holds every spec.
MAX_SPEC_BYTES = 64 * 1024
#: Who and why are shown in history, not stored as data: a line each.
MAX_TEXT = 500
SpecLike = ScheduleSpec | Mapping[str, Any]
NESTED = f"nested more than {MAX_DEPTH} levels deep: flatten it"
#: A new timing replaces the other kind (and an interval drops the cron's time zone).
_REPLACES = (("cron", "every"), ("every", "cron"), ("every", "timezone"))


def checked_spec(raw: SpecLike) -> ScheduleSpec:
    """``raw`` as a valid spec of at most ``MAX_SPEC_BYTES``, or ``InvalidSchedule``."""
    if isinstance(raw, ScheduleSpec):
        return _small(raw)
    if not isinstance(raw, Mapping):
        raise InvalidSchedule("?", [f"give a table of fields, not {type(raw).__name__}"])
    name = str(raw.get("name", "?"))[:100]
    try:
        body = orjson.dumps(dict(raw), default=str)
    except TypeError:  # orjson's recursion limit: no field of a schedule nests that deep
        raise InvalidSchedule(name, [f"a field is {NESTED}"]) from None
    _size(name, body)
    try:
        spec = ScheduleSpec.model_validate(dict(raw))
    except ValidationError as error:
        raise InvalidSchedule(name, spec_problems(error)) from None
    return _small(spec)


def updated_spec(spec: ScheduleSpec, changes: Mapping[str, Any]) -> ScheduleSpec:
    """``spec`` with ``changes`` over it; a field set to None goes back to its default."""
    if not isinstance(changes, Mapping) or not changes:
        raise InvalidSchedule(spec.name, ["give the fields to change, e.g. {'every': '10m'}"])
    if "name" in changes and changes["name"] != spec.name:
        raise InvalidSchedule(
            spec.name, ["name: a schedule cannot be renamed; create one, archive this one"]
        )
    merged = spec_json(spec)
    for given, replaced in _REPLACES:
        if changes.get(given) is not None and replaced not in changes:
            merged.pop(replaced, None)
    merged.update(changes)
    return checked_spec({key: value for key, value in merged.items() if value is not None})


def checked_text(value: str | None, what: str, *, required: bool = False) -> str | None:
    """A ``by`` or ``reason``: one printable line of at most ``MAX_TEXT`` characters."""
    if value is None or not value.strip():
        if required:
            raise InvalidSchedule("?", [f"{what}: say who makes the change, e.g. 'ops@host'"])
        return None
    if len(value) > MAX_TEXT or not value.isprintable():
        raise InvalidSchedule("?", [f"{what}: one printable line of at most {MAX_TEXT} chars"])
    return value.strip()


def _small(spec: ScheduleSpec) -> ScheduleSpec:
    _size(spec.name, orjson.dumps(spec_json(spec)))
    return spec


def _size(name: str, body: bytes) -> None:
    if len(body) > MAX_SPEC_BYTES:
        raise InvalidSchedule(
            name,
            [
                f"the schedule is {len(body)} bytes as JSON, over {MAX_SPEC_BYTES}: keep "
                "payloads small and let the task fetch large data"
            ],
        )
