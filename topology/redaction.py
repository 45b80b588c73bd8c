"""Which HTTP headers carry secrets, and how a payload is shown to people without them.

Failure records keep a webhook's headers as they were sent, so that a replay still works;
everything that shows a record to a person (``warren failed``, the monitor's logs and alerts, the
dashboard) passes its payload through ``redact_payload`` first. A secret reference such as
``{"env": "API_TOKEN"}`` names where the secret lives, not the secret, and is shown as it is.
"""

from __future__ import annotations

from collections.abc import Mapping

import orjson

REDACTED = "***"
_SENSITIVE_NAMES = frozenset(
    {"authorization", "cookie", "set-cookie", "proxy-authorization", "x-api-key"}
)
_SENSITIVE_PARTS = ("token", "secret", "password")


def sensitive_header(name: str) -> bool:
    """Tell whether a header of this name usually carries a credential."""
    lowered = name.lower()
    return lowered in _SENSITIVE_NAMES or any(part in lowered for part in _SENSITIVE_PARTS)


def redact_headers(headers: Mapping[str, object]) -> dict[str, object]:
    """Return ``headers`` with the literal value of every sensitive header replaced."""
    return {
        name: REDACTED if isinstance(value, str) and sensitive_header(name) else value
        for name, value in headers.items()
    }


def redact_payload(payload: object) -> object:
    """Return a copy of an ``http`` task's payload fit to show; other payloads as they are."""
    if not isinstance(payload, Mapping) or not isinstance(payload.get("headers"), Mapping):
        return payload
    return {**payload, "headers": redact_headers(payload["headers"])}


def redact_task(data: object) -> object:
    """Return a task envelope (decoded JSON) with its ``http`` payload fit to show."""
    if not isinstance(data, Mapping) or "payload" not in data:
        return data
    return {**data, "payload": redact_payload(data["payload"])}


def redact_body(body: bytes) -> bytes:
    """Return a message body fit to show: a task envelope's secrets hidden, else as it is."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    shown = redact_task(data)
    return body if shown is data else orjson.dumps(shown)
