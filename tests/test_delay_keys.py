"""The delay levels' routing maths, without a broker: keys, bindings and the time held."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from warren_cron.delay import (
    MAX_DELAY_SECONDS,
    delay_key,
    held_seconds,
    level_pattern,
    seconds_until,
)
from warren_cron.errors import PlanError
from warren_cron.names import DELAY_LEVELS

T0 = datetime(2030, 1, 1, tzinfo=UTC)


def topic_match(pattern: str, key: str) -> bool:
    """RabbitMQ's topic matching: ``*`` is one word, ``#`` zero or more."""
    return _match(pattern.split("."), key.split("."))


def _match(words: list[str], keys: list[str]) -> bool:
    if not words:
        return not keys
    if words[0] == "#":
        return any(_match(words[1:], keys[i:]) for i in range(len(keys) + 1))
    return bool(keys) and words[0] in ("*", keys[0]) and _match(words[1:], keys[1:])


def walk(key: str) -> tuple[int, int]:
    """Route ``key`` through the levels as the broker does: (seconds held, queues entered)."""
    held = entered = 0
    for level in reversed(range(DELAY_LEVELS)):
        hold, passes = (
            topic_match(level_pattern(level, "1"), key),
            topic_match(level_pattern(level, "0"), key),
        )
        assert hold != passes, f"level {level} must route {key} exactly one way"
        if hold:
            held += 2**level
            entered += 1
    return held, entered


@pytest.mark.parametrize(
    ("seconds", "tail"),
    [(1, "0.1.30s"), (2, "1.0.30s"), (5, "1.0.1.30s"), (65, "1.0.0.0.0.0.1.30s")],
)
def test_the_delay_is_written_in_binary_before_the_plan(seconds: int, tail: str) -> None:
    """28 words of bits, most significant first, then the plan key as the last word."""
    key = delay_key(seconds, "30s")
    assert key.endswith(tail) and len(key.split(".")) == DELAY_LEVELS + 1


@pytest.mark.parametrize("seconds", [0, 1, 2, 3, 10, 65, 3600, 86_400, 2**27, MAX_DELAY_SECONDS])
def test_the_levels_hold_a_message_exactly_its_delay(seconds: int) -> None:
    """Each level holds 2^n s when bit n is set and passes the message on otherwise."""
    key = delay_key(seconds, "final")
    held, entered = walk(key)
    assert held == held_seconds(key) == seconds
    assert entered == bin(seconds).count("1") <= DELAY_LEVELS


def test_random_delays_up_to_the_maximum_route_to_their_sum() -> None:
    """A sample across the whole range: what the levels hold is what was asked for."""
    rng = random.Random(14)  # noqa: S311 - a repeatable sample, no secret
    for seconds in (rng.randrange(MAX_DELAY_SECONDS + 1) for _ in range(200)):
        assert walk(delay_key(seconds, "1s-2s"))[0] == seconds


@pytest.mark.parametrize("seconds", [-1, MAX_DELAY_SECONDS + 1])
def test_a_delay_outside_the_levels_is_refused(seconds: int) -> None:
    """Beyond 2^28 - 1 s (about 8.5 years) the error says the range."""
    with pytest.raises(PlanError, match=r"8\.5 years"):
        delay_key(seconds, "final")


@pytest.mark.parametrize(
    ("due", "held"),
    [
        (T0, 0),
        (T0 - timedelta(hours=1), 0),
        (T0 + timedelta(seconds=3), 3),
        (T0 + timedelta(seconds=2.1), 3),
    ],
)
def test_a_due_time_is_held_in_whole_seconds_rounded_up(due: datetime, held: int) -> None:
    """Never early: a fraction of a second waits the whole second; the past is now."""
    assert seconds_until(due, T0) == held
