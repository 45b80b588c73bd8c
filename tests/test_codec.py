"""The task message codec: every builder's message, decoded as the worker and the tools read it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import aio_pika
import pytest
from pydantic import ValidationError

from tests.wire import MAIN, incoming, schedules, unframed, worker_delivery
from warren_cron import codec
from warren_cron.broker.batch import encode
from warren_cron.client.options import EnqueueOptions, one_off
from warren_cron.delay import delay_key
from warren_cron.envelope import CONTENT_TYPE, Envelope
from warren_cron.errors import MessageDecodeError
from warren_cron.failed.replay_message import replay_message
from warren_cron.names import FAILED_KEY
from warren_cron.records import Failure, envelope_record, failure_record, read_record
from warren_cron.scheduler.publisher import fire_message
from warren_cron.worker.adopt import adopted_message

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
    assert codec.decode_body(codec.encode(envelope)) == envelope


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
        codec.decode_body(body)


def test_a_payload_that_is_no_json_is_refused_where_an_envelope_is_built() -> None:
    """Built in code, the payload is checked in full: a value JSON cannot carry is refused
    (a decoded body's payload is JSON already and is taken as parsed)."""
    with pytest.raises(ValidationError, match="payload"):
        Envelope(task="noop", run_id="r", scheduled_for=WHEN, payload={"at": WHEN})
    nested = {"a": [1, 2.5, None, True, {"b": "c"}], "n": 2**63 - 1}
    body = codec.encode(Envelope(task="noop", run_id="r", scheduled_for=WHEN, payload=nested))
    assert codec.decode_body(body).payload == nested


@pytest.mark.parametrize("fire", [WHEN, WHEN + timedelta(microseconds=250_000)])
def test_a_fire_body_is_the_body_of_its_envelope(fire: datetime) -> None:
    """The scheduler's fast body is exactly encode() of the fire's envelope, for every kind
    of schedule."""
    for schedule in schedules():
        run_id = schedule.run_id(fire)
        assert codec.fire_body(schedule.spec, run_id, fire) == codec.encode(schedule.envelope(fire))


Built = tuple[aio_pika.abc.AbstractIncomingMessage, Envelope, dict[str, Any]]


def scheduled_fire() -> Built:
    """A fire as the scheduler's batch frames carry it."""
    schedule = schedules()[1]
    frames = encode(fire_message(schedule, WHEN, "cron_tasks"), 1, 200)
    return (
        unframed(frames, schedule.routing_key),
        schedule.envelope(WHEN),
        {"cron-schedule": "full"},
    )


def enqueued(delay: float | None = None) -> Built:
    """A one-off task as ``Client.enqueue`` publishes it, now or through the delay levels."""
    options: EnqueueOptions = {"ttl": 3600} if delay is None else {"ttl": 3600, "delay": delay}
    envelope = one_off("mail", {"to": "a@x"}, options, WHEN)
    key = "1s" if delay is None else delay_key(int(delay), "1s")
    return incoming(codec.task_message(envelope), key), envelope, {}


def first_failure() -> tuple[Envelope, aio_pika.Message]:
    """The failure record a worker writes for a scheduled task that spent its plan."""
    envelope = schedules()[0].envelope(WHEN)
    delivery = worker_delivery(codec.task_message(envelope, {"trace": "t-1"}))
    failure = Failure("retries-exhausted", "RuntimeError: boom", 3)
    return envelope, failure_record(delivery, failure, WHEN, envelope.run_id)


def failed() -> Built:
    """The failure record, as the failed queue gives it back."""
    envelope, record = first_failure()
    expected = {"cron-schedule": "plain", "trace": "t-1", "cron-reason": "retries-exhausted"}
    return incoming(record, FAILED_KEY), envelope, expected


def replayed() -> Built:
    """The failure record replayed to the tasks exchange."""
    envelope, record = first_failure()
    message = replay_message(read_record(incoming(record, FAILED_KEY), MAIN), WHEN)
    return incoming(message, "1s"), envelope, {"trace": "t-1", "cron-replays": 1}


def adopted() -> Built:
    """The planned copy of a task published by hand, with an id and headers of its own."""
    envelope = Envelope(task="job", run_id="by-hand", schedule="nightly", scheduled_for=WHEN)
    hand = aio_pika.Message(
        codec.encode(envelope),
        headers={"cron-run-id": "other", "cron-schedule": "theirs", "x-death": [{"count": 1}]},
        message_id="m-own",
        content_type=f"{CONTENT_TYPE}; charset=utf-8",
        app_id="rabbitmqadmin",
        expiration=60,
    )
    copy = adopted_message(worker_delivery(hand, MAIN, redelivered=True), envelope)
    expected = {"cron-schedule": "theirs", "cron-redelivered": True}
    return incoming(copy, "1s"), envelope, expected


def filled() -> Built:
    """A record that the benchmarks and tests fill a failed queue with."""
    envelope = one_off("noop", None, {}, WHEN)
    record = envelope_record(envelope, Failure("retries-exhausted", "e", 2), WHEN)
    return incoming(record, FAILED_KEY), envelope, {"cron-attempts": 2}


@pytest.mark.parametrize(
    "build",
    [scheduled_fire, enqueued, lambda: enqueued(delay=90), replayed, adopted, failed, filled],
    ids=["fire", "enqueue", "delayed", "replay", "adopted", "failure-record", "filled-record"],
)
def test_every_task_message_decodes_to_its_envelope_under_one_run_id(
    build: Callable[[], Built],
) -> None:
    """Each builder's message, read back off the wire: its envelope, persistent JSON, and the
    run id the same as message id, header and envelope field, whichever reader asks."""
    message, envelope, expected = build()
    headers = dict(message.headers or {})
    assert codec.decode(message) == envelope
    assert message.message_id == headers["cron-run-id"] == envelope.run_id
    assert codec.run_id_of(envelope.run_id, message.message_id, headers) == envelope.run_id
    assert read_record(message, MAIN).run_id == envelope.run_id
    assert message.delivery_mode == 2 and str(message.content_type).startswith(CONTENT_TYPE)
    assert message.expiration is None and "x-death" not in headers
    assert expected.items() <= headers.items()


@pytest.mark.parametrize(
    ("body", "message_id", "headers", "run_id"),
    [
        ("b", "from-id", {"cron-run-id": "h"}, "from-id"),
        ("from-body", None, {"cron-run-id": "h"}, "from-body"),
        (None, "from-id", {"cron-run-id": "h"}, "from-id"),
        ("", None, {"cron-run-id": b"from-header"}, "from-header"),
        (7, None, None, "7"),
        (None, None, {}, None),
    ],
)
def test_the_run_id_is_read_from_the_message_id_else_the_envelope_else_the_header(
    body: object, message_id: str | None, headers: dict[str, Any] | None, run_id: str | None
) -> None:
    """Parts that disagree (a hand-published message) resolve to the publisher's message id:
    one name per message, also where many bodies share one run id."""
    assert codec.run_id_of(body, message_id, headers) == run_id


def test_the_run_id_header_is_written_once_and_wins_over_a_senders() -> None:
    """A sender's cron-schedule is kept, its cron-run-id is not: the id is the message id."""
    headers = codec.task_headers("r", "s", {"cron-run-id": "x", "cron-schedule": "t", "k": 1})
    assert headers == {"cron-run-id": "r", "cron-schedule": "t", "k": 1}
    assert codec.task_headers(None, extra={"k": 1}) == {"k": 1}
