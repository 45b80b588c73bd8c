"""The task message on the wire, in this one module: its body, headers and properties.

Every task message is an ``Envelope`` as JSON, published persistent, with the run id as its
``message_id`` and in the ``cron-run-id`` header, and the schedule's name in ``cron-schedule``.
``task_headers`` is the one place a run id is written; ``run_id_of`` the one place it is read
back from a message whose parts may disagree (a hand-published one). Whatever builds a task
message (a fire, an enqueue, a delayed enqueue, an adopted copy, a replay, a failure record)
builds it here; the scheduler's fires skip the model for speed (``fire_body``) but not the rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import aio_pika
import orjson
from aio_pika.abc import AbstractIncomingMessage
from pamqp.commands import Basic
from pydantic import ValidationError

from warren_cron.clock import json_time
from warren_cron.envelope import CONTENT_TYPE, Envelope
from warren_cron.errors import MessageDecodeError, validation_problems
from warren_cron.flowlimits import FlowLimits
from warren_cron.headers import H_RUN_ID, H_SCHEDULE, text
from warren_cron.jsonvalue import DECODED
from warren_cron.tracing import published

#: The AMQP properties a copy keeps from its message (a record, a replay, an adopted copy).
KEPT_PROPERTIES = (
    "message_id",
    "content_type",
    "content_encoding",
    "correlation_id",
    "timestamp",
    "type",
    "app_id",
)
#: pamqp spells the AMQP ``type`` property ``message_type``.
_PAMQP_NAMES = {"type": "message_type"}
_NONE: Mapping[str, Any] = {}
Properties = Mapping[str, Any] | Basic.Properties | AbstractIncomingMessage


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One persistent JSON message for ``broker/batch.py``: the properties of ``task_message``."""

    exchange: str
    routing_key: str
    body: bytes
    #: Required: the broker's returns name the message by it.
    message_id: str
    headers: Mapping[str, str]
    #: The AMQP ``type`` property (the schedules log tells its messages apart by it).
    type: str | None = None


class Delivered(Protocol):
    """A delivered message, as the worker or a reader of a queue holds it."""

    @property
    def body(self) -> bytes: ...  # noqa: D102 - a property of the protocol


#: Left out of a body when None, so that bodies without limits keep their bytes.
_NO_LIMITS: set[str] = {"limits"}


def encode(envelope: Envelope) -> bytes:
    """The JSON body of an envelope (``limits`` only when it has some)."""
    left_out = _NO_LIMITS if envelope.limits is None else None
    return orjson.dumps(envelope.model_dump(mode="json", exclude=left_out))


class FireSpec(Protocol):
    """What a fire's envelope takes from its schedule (``ScheduleSpec``, validated before)."""

    @property
    def name(self) -> str: ...  # noqa: D102 - a property of the protocol
    @property
    def task(self) -> str: ...  # noqa: D102
    @property
    def payload(self) -> Any: ...  # noqa: D102
    @property
    def timeout_seconds(self) -> float | None: ...  # noqa: D102
    @property
    def concurrency(self) -> str: ...  # noqa: D102
    @property
    def limits(self) -> FlowLimits | None: ...  # noqa: D102


def fire_body(spec: FireSpec, run_id: str, scheduled_for: datetime) -> bytes:
    """``encode`` of a fire's envelope without building the model: the spec was validated."""
    body = {
        "task": spec.task,
        "payload": spec.payload,
        "run_id": run_id,
        "schedule": spec.name,
        "scheduled_for": json_time(scheduled_for),
        "timeout_seconds": spec.timeout_seconds,
        "deadline": None,
        "concurrency": spec.concurrency,
    }
    if spec.limits is not None:
        body["limits"] = spec.limits.model_dump()
    return orjson.dumps(body)


def decode(message: Delivered) -> Envelope:
    """The envelope of a delivered message, or ``MessageDecodeError`` saying what is wrong."""
    return decode_body(message.body)


def decode_body(body: bytes) -> Envelope:
    """Parse and validate a body, or raise ``MessageDecodeError`` saying what is wrong."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise MessageDecodeError(f"body is not valid UTF-8 JSON: {error}") from None
    if not isinstance(data, dict):
        raise MessageDecodeError(f"body must be a JSON object, got {type(data).__name__}")
    try:
        return Envelope.model_validate(data, context=DECODED)
    except ValidationError as error:
        problems = "; ".join(validation_problems(error, whole="body"))
        raise MessageDecodeError(f"invalid task envelope: {problems}") from None


def task_headers(
    run_id: str | None, schedule: str | None = None, extra: Mapping[str, Any] = _NONE
) -> dict[str, Any]:
    """The headers of a task message: run id, schedule, then ``extra`` (whose schedule wins,
    as a sender's header does; the run id does not yield: it is also the ``message_id``)."""
    headers: dict[str, Any] = {} if run_id is None else {H_RUN_ID: run_id}
    if schedule is not None:
        headers[H_SCHEDULE] = schedule
    if extra:
        headers.update(extra)
        if run_id is not None:
            headers[H_RUN_ID] = run_id
    return headers


def kept_properties(props: Properties) -> dict[str, Any]:
    """The properties of ``KEPT_PROPERTIES`` that are set: from a mapping, pamqp's properties
    of a delivery, or aio-pika's message."""
    if isinstance(props, Mapping):
        values = {name: props.get(name) for name in KEPT_PROPERTIES}
    elif isinstance(props, Basic.Properties):
        values = {name: getattr(props, _PAMQP_NAMES.get(name, name)) for name in KEPT_PROPERTIES}
    else:
        values = {name: getattr(props, name) for name in KEPT_PROPERTIES}
    return {name: value for name, value in values.items() if value is not None}


def persistent_message(
    body: bytes, headers: Mapping[str, Any], properties: Properties = _NONE
) -> aio_pika.Message:
    """A persistent message with the kept ``properties`` of another one, and the run id of its
    ``cron-run-id`` header (``task_headers``) as its ``message_id``."""
    kept = kept_properties(properties)
    run_id = headers.get(H_RUN_ID)
    if run_id is not None:
        kept["message_id"] = text(run_id)
    return aio_pika.Message(
        body, headers=dict(headers), delivery_mode=aio_pika.DeliveryMode.PERSISTENT, **kept
    )


def task_message(envelope: Envelope, extra: Mapping[str, Any] = _NONE) -> aio_pika.Message:
    """The message of an envelope as published now (an enqueue, now or delayed): JSON body,
    persistent, run id and schedule in its headers, ``extra`` headers after them."""
    # The run's trace begins here (docs/tracing.md); a sender's own headers win.
    traced = published(envelope.run_id, "enqueue", envelope.schedule, envelope.task)
    if traced:
        extra = {**traced, **extra}
    headers = task_headers(envelope.run_id, envelope.schedule, extra)
    return persistent_message(encode(envelope), headers, {"content_type": CONTENT_TYPE})


def fire_outgoing(
    exchange: str, routing_key: str, body: bytes, run_id: str, schedule: str
) -> Outgoing:
    """A scheduled fire for ``publish_batch``: the properties of ``task_message``'s message."""
    # The run's trace begins at its fire (docs/tracing.md).
    headers = task_headers(run_id, schedule, published(run_id, "fire", schedule, None))
    return Outgoing(exchange, routing_key, body, headers[H_RUN_ID], headers)


def run_id_of(
    body_run_id: object, message_id: str | None, headers: Mapping[str, Any] | None
) -> str | None:
    """A message's run id: its ``message_id``, else its envelope's, else its ``cron-run-id``
    header; None when it carries none.

    Ours carry one id in all three. A message published by someone else may not: the message
    id is the publisher's name for that one message, while a body's ``run_id`` may be shared
    by every message built from one template, which would fold their failures into one.
    """
    if message_id:
        return message_id
    if isinstance(body_run_id, str | int | float) and body_run_id != "":
        return str(body_run_id)
    found = (headers or _NONE).get(H_RUN_ID)
    return None if found is None else text(found)
