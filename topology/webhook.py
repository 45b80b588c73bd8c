"""The payload of the built-in ``http`` task: validated where schedules are read and where it runs.

The scheduler checks each http schedule's payload when it loads the schedules file, and the
worker checks every message's payload again before it calls anything: both use this model.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import httpx
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
    model_validator,
)

from topology.errors import PermanentError, validation_problems

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
_HEADER_VALUE = re.compile(r"^[\t\x20-\x7e]*$")


class HttpRequest(BaseModel):
    """Payload of an ``http`` task."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(pattern=r"^https?://")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    json_body: JsonValue = Field(None, alias="json")
    body: str | None = None
    timeout: float | None = Field(None, gt=0)

    # A URL or header that httpx cannot send fails the same way on every attempt: refuse it
    # here, so the task fails once as a permanent error instead of spending its retries.
    @field_validator("url")
    @classmethod
    def _sendable_url(cls, value: str) -> str:
        try:
            url = httpx.URL(value)
        except httpx.InvalidURL as error:
            raise ValueError(f"not a usable URL ({error})") from None
        if not url.host:
            raise ValueError("the URL names no host")
        if url.port is not None and not 0 < url.port < 65536:
            raise ValueError(f"port {url.port} is outside 1..65535")
        return value

    @field_validator("headers")
    @classmethod
    def _sendable_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not _HEADER_NAME.match(name):
                raise ValueError(f"header name {name!r} is not an HTTP token")
            if not _HEADER_VALUE.match(text):
                raise ValueError(f"header {name!r} must be printable ASCII on one line")
        return value

    @model_validator(mode="after")
    def _one_body(self) -> HttpRequest:
        if self.json_body is not None and self.body is not None:
            raise ValueError("give either 'json' or 'body', not both")
        return self


def parse_request(payload: Any) -> HttpRequest:
    """Validate an ``http`` payload, or raise ``PermanentError`` saying which field is wrong."""
    try:
        return HttpRequest.model_validate(payload)
    except ValidationError as error:
        problems = "; ".join(validation_problems(error, whole="payload"))
        raise PermanentError(f"invalid http payload: {problems}") from None
