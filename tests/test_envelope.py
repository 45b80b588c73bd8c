"""The task envelope: JSON on the wire, validated on the way in."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from warren_cron.envelope import Envelope
from warren_cron.errors import MessageDecodeError

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_encode_then_decode_gives_the_same_envelope() -> None:
    """An envelope survives the wire unchanged."""
    envelope = Envelope(
        task="http",
        payload={"url": "http://x"},
        run_id="r@1",
        schedule="s",
        scheduled_for=WHEN,
        timeout_seconds=5,
        deadline=WHEN,
    )
    assert Envelope.decode(envelope.encode()) == envelope


def test_headers_carry_run_id_and_schedule() -> None:
    """Every attempt carries cron-run-id and cron-schedule headers."""
    envelope = Envelope(task="noop", run_id="r@1", schedule="nightly", scheduled_for=WHEN)
    assert envelope.headers() == {"cron-run-id": "r@1", "cron-schedule": "nightly"}


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"{not json", "not valid UTF-8 JSON"),
        (b"\xff\xfe\x00", "not valid UTF-8 JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"task": "noop"}', "run_id: Field required"),
        (b'{"task": 5, "run_id": "r", "scheduled_for": "2026-01-01T00:00:00Z"}', "task:"),
        (
            b'{"task": "noop", "run_id": "r", "scheduled_for": "2026-01-01T00:00:00"}',
            "scheduled_for",
        ),
        (b'{"task": "", "run_id": "r", "scheduled_for": "2026-01-01T00:00:00Z"}', "task:"),
    ],
)
def test_invalid_bodies_raise_a_decode_error_that_says_why(body: bytes, why: str) -> None:
    """Each kind of bad body is a MessageDecodeError naming the problem."""
    with pytest.raises(MessageDecodeError, match=why):
        Envelope.decode(body)


def test_a_payload_that_is_no_json_is_refused_where_an_envelope_is_built() -> None:
    """Built in code, the payload is checked in full: a value JSON cannot carry is refused
    (a decoded body's payload is JSON already and is taken as parsed)."""
    with pytest.raises(ValidationError, match="payload"):
        Envelope(task="noop", run_id="r", scheduled_for=WHEN, payload={"at": WHEN})
    nested = {"a": [1, 2.5, None, True, {"b": "c"}], "n": 2**63 - 1}
    body = Envelope(task="noop", run_id="r", scheduled_for=WHEN, payload=nested).encode()
    assert Envelope.decode(body).payload == nested
