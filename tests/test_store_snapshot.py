"""Snapshots read back without validating every spec again: the same schedules, and a
snapshot that is not warren's refused with an error that names what is wrong."""

from __future__ import annotations

import zlib
from typing import Any

import orjson
import pytest

from warren_cron.errors import StoreError
from warren_cron.schedules.spec import RetrySpec, ScheduleSpec
from warren_cron.schedules.trusted import ADAPTED, PLAIN
from warren_cron.store.changes import Change, spec_json
from warren_cron.store.snapshot import decode_state, encode_snapshot
from warren_cron.store.state import StoreState

#: A spec of each shape a snapshot holds: every optional field set by one of them.
SHAPES: list[dict[str, Any]] = [
    {
        "cron": "{m} {h} * * 1-5",
        "timezone": "Europe/Berlin",
        "task": "http",
        "payload": {"url": "https://reports.example.com/{i}", "method": "POST"},
        "timeout_seconds": 120,
        "retry": {"max_retries": 5, "delay_ms": 10000, "multiplier": 2},
    },
    {"every": "{m}m", "task": "noop", "jitter": "30s", "catch_up": "all", "enabled": False},
    {
        "cron": "{m} {h} * * *",
        "task": "noop",
        "start_at": "2026-01-01T00:00:00Z",
        "runs": 5,
        "exclude": ["2026-12-25", "2027-01-01"],
        "concurrency": "Forbid",
    },
    {
        "every": "1h",
        "task": "noop",
        "start_at": "2026-01-01T08:00:00",
        "stop_at": "2027-01-01T00:00:00+01:00",
        "misfire_grace_seconds": 60,
        "expect_success_within": "26h",
        "pause_on_failure": True,
        "payload": [1, "two", None, {"three": 3.5}],
    },
    {
        "every": "5m",
        "task": "http",
        "limits": {"concurrency": 2, "rate": "10/1m:2", "key": "@host"},
    },
]


def spec_of(index: int) -> ScheduleSpec:
    """Schedule ``index``, of shape ``index % len(SHAPES)``, validated as a writer does."""
    shape = SHAPES[index % len(SHAPES)]
    fields = {
        key: value.format(i=index, m=index % 60 or 1, h=index % 24)
        if isinstance(value, str)
        else value
        for key, value in shape.items()
    }
    payload = fields.get("payload")
    if isinstance(payload, dict):
        fields["payload"] = {k: str(v).format(i=index) for k, v in payload.items()}
    return ScheduleSpec.model_validate({"name": f"s-{index:05d}", **fields})


def state_of(count: int) -> StoreState:
    """A store of ``count`` schedules, some updated, some archived."""
    state = StoreState()
    for index in range(count):
        spec = spec_of(index)
        assert state.apply(Change("create", spec.name, 0, "app", "signup", spec_json(spec))) is None
        if index % 7 == 0:
            assert state.apply(Change("archive", spec.name, 1, "ops", "gone")) is None
    state.offset = 2 * count
    return state


def body_of(data: Any) -> bytes:
    """A snapshot message body holding ``data``."""
    return zlib.compress(orjson.dumps(data))


def one_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """A snapshot of one schedule, ``spec`` as its spec (named ``s``)."""
    entry = {"spec": spec, "version": 1, "status": "active", "history": [], "manager": None}
    return {"v": 1, "offset": 3, "schedules": {"s": entry}}


def without_time(body: bytes) -> dict[str, Any]:
    """A snapshot's content less the moment it was written."""
    data: dict[str, Any] = orjson.loads(zlib.decompress(body))
    data.pop("written_at")
    return data


def test_a_snapshot_of_10k_schedules_reads_back_identically() -> None:
    """Every spec, version, status, history and manager comes back equal to the validated
    original, and the snapshot written again from what was read is the same."""
    state = state_of(10_000)
    body = encode_snapshot(state)
    read = decode_state(body)
    assert read.offset == state.offset and read.entries.keys() == state.entries.keys()
    for name, entry in state.entries.items():
        again = read.entries[name]
        assert again.spec == entry.spec, name
        assert spec_json(again.spec) == spec_json(entry.spec), name
        assert type(again.spec.retry) is type(entry.spec.retry), name
        assert (again.version, again.status, again.history) == (
            entry.version,
            entry.status,
            entry.history,
        )
    assert without_time(encode_snapshot(read)) == without_time(body)


def test_the_fast_path_knows_every_field_of_a_spec() -> None:
    """A field added to ScheduleSpec must be given its JSON types here, or snapshots would
    validate every spec in full (slow) without anyone noticing."""
    assert PLAIN.keys() | ADAPTED.keys() | {"retry"} == ScheduleSpec.model_fields.keys()
    # Specs are built as ``model_construct`` builds them, which holds for plain models only.
    for model in (ScheduleSpec, RetrySpec):
        assert not model.__pydantic_post_init__ and not model.__private_attributes__
        assert all(f.alias is None for f in model.model_fields.values())


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"\x78\x9c truncated", "not zlib"),
        (zlib.compress(b"{not json"), "not JSON"),
        (body_of({"v": 9, "offset": 1, "schedules": {}}), "format 9, this version reads 1"),
        (body_of([1, 2, 3]), "AttributeError"),
        (body_of({"v": 1, "offset": 1}), "KeyError: 'schedules'"),
        (body_of(one_spec({"name": "s", "cron": "61 * * * *", "task": "noop"})), "'s'.*61"),
        (body_of(one_spec({"name": "s", "every": "1h", "task": "noop", "x": 1})), "'s'.*x"),
        (body_of(one_spec({"name": "t", "every": "1h", "task": "noop"})), "named 't'"),
        (body_of(one_spec({"name": "s", "task": "noop"})), "'s'.*exactly one"),
        (body_of(one_spec({"name": "s", "every": "1h", "timezone": "Mars/Base"})), "'s'"),
        (body_of(one_spec({"name": "s", "every": 5, "task": "noop"})), "'s'.*every"),
    ],
)
def test_a_snapshot_not_written_by_warren_is_refused_clearly(body: bytes, says: str) -> None:
    """Not zlib, not JSON, another format, a bad cron, an unknown field, a spec of another
    name, no timing, a bad zone, a wrong type: a StoreError naming it, never a crash."""
    with pytest.raises(StoreError, match=f"snapshot cannot be read .*{says}"):
        decode_state(body)


def test_a_bad_entry_is_refused_with_its_name() -> None:
    """An entry of another status or shape is named, not guessed at."""
    data = one_spec({"name": "s", "every": "1h", "task": "noop"})
    data["schedules"]["s"]["status"] = "deleted"
    with pytest.raises(StoreError, match=r"schedule 's'.*status 'deleted'"):
        decode_state(body_of(data))
