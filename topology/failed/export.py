"""Failed records as JSON lines: what ``warren failed export`` writes and ``restore`` reads.

The form is lossless: a body that is not UTF-8 is kept as base64, header values are turned
into JSON values, and a restored record reads the same as the exported one on any broker.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import aio_pika

from warren_cron.codec import persistent_message, task_headers
from warren_cron.headers import (
    H_ATTEMPTS,
    H_ERROR,
    H_FAILED_AT,
    H_REASON,
    H_ROUTING_KEY,
    H_X_DEATH,
    as_utc,
    jsonable,
)
from warren_cron.records import FailedRecord


def exported(record: FailedRecord) -> dict[str, Any]:
    """The whole record as one JSON object: what ``export`` writes, ``restore`` reads."""
    data = record.summary()
    data["routing_key"] = record.routing_key
    data["x_death"] = jsonable(record.history)
    data["properties"] = jsonable(dict(record.properties))
    data["headers"] = jsonable(dict(record.headers))
    data.update(body_fields(record.body))
    return data


def body_fields(body: bytes) -> dict[str, Any]:
    """The body as UTF-8 text when it is, else as base64: a lossless JSON form."""
    try:
        return {"body": body.decode()}
    except UnicodeDecodeError:
        return {"body": None, "body_base64": base64.b64encode(body).decode()}


def _exported_body(data: Mapping[str, Any]) -> bytes:
    if data.get("body_base64") is not None:
        return base64.b64decode(data["body_base64"])
    return str(data.get("body") or "").encode()


def _exported_headers(data: Mapping[str, Any]) -> dict[str, Any]:
    # The record's fields are written as cron-* headers so a restored record reads the same
    # on any broker: RabbitMQ 4.x drops an x-death header that a client publishes.
    headers = {k: v for k, v in (data.get("headers") or {}).items() if not k.startswith("x-")}
    fields = {
        H_REASON: data.get("reason"),
        H_ATTEMPTS: data.get("attempts"),
        H_ERROR: data.get("error"),
        H_FAILED_AT: data.get("failed_at"),
        H_ROUTING_KEY: data.get("routing_key"),
        H_X_DEATH: data.get("x_death") or [],
    }
    headers.update({k: v for k, v in fields.items() if v is not None})
    return headers


def restored_message(data: Mapping[str, Any]) -> aio_pika.Message:
    """The failed-queue message of one exported record (a line written by ``export``)."""
    props = dict(data.get("properties") or {})
    props["timestamp"] = as_utc(props.get("timestamp"))
    headers = task_headers(data.get("run_id"), extra=_exported_headers(data))
    return persistent_message(_exported_body(data), headers, props)
