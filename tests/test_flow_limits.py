"""A schedule's own flow limits: written in its spec, validated with the file, carried by its
task messages, and applied by every worker under ``schedule:<name>``; keys made from
hostile payloads stay bounded."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import plan
from tests.helpers import envelope, publish, publish_all
from tests.namespace import TestBroker
from tests.test_concurrency_limits import limited_workers
from warren_cron import codec
from warren_cron.errors import MessageDecodeError, ScheduleError
from warren_cron.faultkit.waits import eventually
from warren_cron.flowlimits import MAX_KEY_TEXT, FlowLimits, key_value
from warren_cron.scheduler.settings import SchedulerSettings
from warren_cron.schedules.load import parse_schedules
from warren_cron.worker.slots import Limit

WHEN = datetime(2026, 5, 1, 2, 30, tzinfo=UTC)
LIMITED = """
[[schedule]]
name = "sync"
every = "1m"
task = "sync"
payload = { customer = "acme" }
limits = { concurrency = 2, rate = "100/5m:5", key = "customer" }
"""


def parsed(text: str) -> Any:
    """The schedules of ``text``."""
    return parse_schedules(text, SchedulerSettings(schedules_file=Path("s.toml"))).schedules


def test_a_schedule_names_its_limits_and_its_messages_carry_them() -> None:
    """``limits`` is read from the file, and the fire's body (the scheduler's fast path) is
    the envelope's, limits included; decoded, a worker sees the same limits."""
    [schedule] = parsed(LIMITED)
    assert schedule.spec.limits == FlowLimits(concurrency=2, rate="100/5m:5", key="customer")
    body = codec.fire_body(schedule.spec, schedule.run_id(WHEN), WHEN)
    assert body == codec.encode(schedule.envelope(WHEN))
    assert codec.decode_body(body).limits == schedule.spec.limits


@pytest.mark.parametrize(
    ("limits", "why"),
    [
        ("{ concurrency = 0 }", "concurrency"),
        ("{ concurrency = 101 }", "concurrency"),
        ('{ rate = "10" }', "N/PERIOD"),
        ('{ rate = "0/1s" }', "N/PERIOD"),
        ('{ rate = "5/1d" }', "N/PERIOD"),
        ('{ concurrency = 1, key = "a b" }', "payload field name"),
        ('{ key = "customer" }', "give concurrency, rate or both"),
        ("{ concurrency = 1, size = 3 }", "size"),
    ],
)
def test_a_bad_limits_block_is_refused_naming_the_schedule_and_field(limits: str, why: str) -> None:
    """The file is refused with the schedule, the field and what a right value looks like."""
    text = LIMITED.replace(
        'limits = { concurrency = 2, rate = "100/5m:5", key = "customer" }', f"limits = {limits}"
    )
    with pytest.raises(ScheduleError, match="sync") as raised:
        parsed(text)
    assert why in str(raised.value)


def test_a_message_with_malformed_limits_is_a_decode_error() -> None:
    """A hand-made body naming an impossible limit fails to decode, saying which field."""
    good = codec.encode(envelope("x", schedule="s", limits=FlowLimits(concurrency=1)))
    bad = good.replace(b'"concurrency":1', b'"concurrency":1000000')
    with pytest.raises(MessageDecodeError, match="limits"):
        codec.decode_body(bad)


@pytest.mark.parametrize(
    ("payload", "key"),
    [
        ({"customer": "acme"}, "acme"),
        ({"customer": 42}, "42"),
        ({}, "-"),
        ({"customer": None}, "-"),
        ("not an object", "-"),
        ({"customer": {"b": 1, "a": [True]}}, '{"a":[true],"b":1}'),
    ],
)
def test_a_key_is_the_fields_value_as_text(payload: object, key: str) -> None:
    """Strings and numbers as written, objects as sorted JSON, missing or null as ``-``."""
    assert key_value(payload, "customer") == key


def test_a_huge_key_is_a_digest_of_bounded_length() -> None:
    """A megabyte of customer id is named by a digest; two such ids stay apart."""
    one = key_value({"customer": "x" * 1_000_000}, "customer")
    two = key_value({"customer": "x" * 999_999 + "y"}, "customer")
    assert len(one) <= MAX_KEY_TEXT and one.startswith("sha256:") and one != two


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"url": "https://h.example/run?token=SECRET123"}, "url"),
        ({"url": "https://ops:SECRET123@h.example/run"}, "url"),
        ({"api_token": "SECRET123"}, "api_token"),
    ],
)
def test_a_key_that_may_be_a_credential_is_named_by_its_digest(
    payload: dict[str, str], field: str
) -> None:
    """A URL with a token or password, or a field of a sensitive name, never shows as the
    key's text (keys show in deferrals and connection names); two secrets stay apart."""
    key = key_value(payload, field)
    other = key_value({field: payload[field].replace("SECRET123", "SECRET124")}, field)
    assert key.startswith("sha256:") and "SECRET" not in key and key != other
    assert key_value({"url": "https://h.example/run?team=blue"}, "url").startswith("https://")


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://api.example:8001/a", "api.example"),
        ("https://API.Example:9443/b?c=d", "api.example"),
        ("https://api.example/", "api.example"),
        ("ftp://api.example/", "-"),
        ("http://", "-"),
        ("not a url at all \x00", "-"),
        (12, "-"),
    ],
)
def test_every_port_of_a_host_is_one_host_key(url: object, host: str) -> None:
    """``@host`` is the lower-case host, whatever the port; anything else is ``-``."""
    assert key_value({"url": url}, "@host") == host


def test_a_schedules_limit_key_names_the_schedule_and_the_value() -> None:
    """Counted under ``schedule:<name>[field=value]``."""
    limited = envelope("sync", {"customer": "acme"}, schedule="sync")
    assert Limit("schedule:sync", 1, "customer").key(limited) == "schedule:sync[customer=acme]"


@pytest.mark.broker
async def test_a_schedules_concurrency_holds_across_workers_per_key(
    broker: TestBroker, run_worker: Any
) -> None:
    """Three workers, no worker setting: the schedule's ``limits`` (one at a time per
    customer) keep each customer's runs apart, two customers side by side, no attempt spent;
    another schedule of the same task is not held back."""
    ledger = await limited_workers(run_worker, 3, None)
    limits = FlowLimits(concurrency=1, key="customer")
    held = [
        envelope("busy", {"seconds": 0.3, "customer": c}, schedule="s", limits=limits)
        for c in ("a", "b") * 3
    ]
    free = [envelope("busy", {"seconds": 0.6, "customer": "free"}, schedule="other") for _ in "abc"]
    await publish_all(broker, held + free, plan(60_000))
    await eventually(lambda: len(ledger.spans) == 9, timeout=40)
    assert ledger.most_at_once("a") == ledger.most_at_once("b") == 1
    assert ledger.most_at_once("free") == 3
    assert set(ledger.attempts) == {1}


@pytest.mark.broker
async def test_a_worker_limit_and_a_schedule_limit_both_hold(
    broker: TestBroker, run_worker: Any
) -> None:
    """``busy=3`` for the task and ``concurrency = 1`` for one schedule: that schedule's runs
    one at a time, the task's runs at most three at once."""
    ledger = await limited_workers(run_worker, 2, "busy=3")
    for index in range(8):
        schedule, limits = ("one", FlowLimits(concurrency=1)) if index % 2 else ("many", None)
        payload = {"seconds": 0.3, "customer": schedule}
        await publish(
            broker, envelope("busy", payload, schedule=schedule, limits=limits), plan(60_000)
        )
    await eventually(lambda: len(ledger.spans) == 8, timeout=40)
    assert ledger.most_at_once("one") == 1
    assert ledger.most_at_once() <= 3


@pytest.mark.broker
async def test_a_worker_setting_names_a_schedule_and_wins_over_its_messages(
    broker: TestBroker, run_worker: Any
) -> None:
    """``CRON_CONCURRENCY_LIMITS=schedule:s=1`` holds runs of the schedule ``s`` one at a
    time, though their messages say 3; runs of the same task by another schedule are free."""
    ledger = await limited_workers(run_worker, 2, "schedule:s=1")
    loose = FlowLimits(concurrency=3)
    pairs = [
        (
            envelope("busy", {"seconds": 0.3, "customer": "s"}, schedule="s", limits=loose),
            envelope("busy", {"seconds": 2.5, "customer": "t"}, schedule="t"),
        )
        for _ in range(3)
    ]
    await publish_all(broker, [env for pair in pairs for env in pair], plan(60_000))
    await eventually(lambda: len(ledger.spans) == 6, timeout=40)
    assert ledger.most_at_once("s") == 1
    assert ledger.most_at_once("t") == 3
