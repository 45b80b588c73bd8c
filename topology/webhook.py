"""The payload of the built-in ``http`` task: validated where schedules are read and where it runs.

The scheduler checks each http schedule's payload when it loads the schedules file, and the
worker checks every message's payload again before it calls anything: both use this model.

A header value, and the payload's ``signing_secret``, may be a reference instead of the
secret itself: ``{"env": "NAME"}`` or ``{"file": "/run/secrets/name"}``. Only the reference
travels in messages, failure records and history; the worker reads the secret when the
attempt runs (``topology/secret_sources.py``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from yarl import URL

from warren_cron.errors import PermanentError, validation_problems
from warren_cron.jsonvalue import DECODED, Json

# Matched whole (``fullmatch``): ``$`` would also match before a final newline, letting
# "token\n" through to aiohttp, which refuses it on every attempt.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
#: Letters, digits, ``-``, ``.``, ``_`` and ``:`` (an IPv6 literal): what a host may hold.
_HOST = re.compile(r"[A-Za-z0-9._:-]+")
#: A pydantic ``pattern`` (Rust's regex, where ``\z`` is the end of the text).
_ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*\z"
#: Headers that frame the request or name its host: from a payload they could send the request
#: to another virtual host than the URL's, or split it in two on the way.
_CLIENT_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


class SecretRef(BaseModel):
    """Where a secret lives: an environment variable of the worker, or a file it can read."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    env: str | None = Field(None, pattern=_ENV_NAME)
    file: str | None = Field(None, pattern=r"^/")

    @model_validator(mode="after")
    def _one_source(self) -> SecretRef:
        if (self.env is None) == (self.file is None):
            raise ValueError('a secret reference is { env = "NAME" } or { file = "/path" }')
        return self

    def __str__(self) -> str:
        return f"env {self.env}" if self.env is not None else f"file {self.file}"


class HttpRequest(BaseModel):
    """Payload of an ``http`` task."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(pattern=r"^https?://")
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] = "POST"
    headers: dict[str, str | SecretRef] = Field(default_factory=dict)
    json_body: Json = Field(None, alias="json")
    body: str | None = None
    timeout: float | None = Field(None, gt=0)
    #: Signs each request with this secret instead of CRON_HTTP_SIGNING_SECRET.
    signing_secret: SecretRef | None = None
    #: Seconds between polls of the status URL a ``202`` names (``worker/http_poll.py``);
    #: None: a 202 is a success like any 2xx.
    poll: float | None = Field(None, ge=1, le=3600)

    # A URL or header that cannot be sent fails the same way on every attempt: refuse it
    # here, so the task fails once as a permanent error instead of spending its retries.
    @field_validator("url")
    @classmethod
    def _sendable_url(cls, value: str) -> str:
        problem = url_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("headers", mode="before")
    @classmethod
    def _sendable_headers(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        return {name: _header_value(name, text) for name, text in value.items()}

    @model_validator(mode="after")
    def _one_body(self) -> HttpRequest:
        if self.json_body is not None and self.body is not None:
            raise ValueError("give either 'json' or 'body', not both")
        return self


# A schedule's URL comes again with every fire: each is judged once.
@lru_cache(maxsize=4096)
def url_problem(value: str) -> str | None:
    """What makes ``value`` a URL that cannot be called, or None when it can be."""
    try:
        url = URL(value)
    except ValueError as error:
        text = str(error)
        return "its port is outside 1..65535" if "port" in text.lower() else f"not usable ({text})"
    if not url.raw_host:
        return "the URL names no host"
    if not _HOST.fullmatch(url.raw_host):
        return "the URL's host holds characters no host name has"
    return "port 0 is outside 1..65535" if url.port == 0 else None


def _header_value(name: object, value: object) -> object:
    """A header's value as sent, or its secret reference; a clear error for anything else."""
    if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
        raise ValueError(f"header name {name!r} is not an HTTP token")
    if name.lower() in _CLIENT_HEADERS:
        raise ValueError(f"header {name!r} is set by the worker from the URL and body")
    if isinstance(value, dict):
        try:
            return SecretRef.model_validate(value)
        except ValidationError as error:
            problems = "; ".join(validation_problems(error))
            raise ValueError(f"header {name!r}: {problems}") from None
    if isinstance(value, str) and _HEADER_VALUE.fullmatch(value):
        return value
    raise ValueError(
        f"header {name!r} must be printable ASCII on one line, or {{ env = ... }} / "
        "{ file = ... }"
    )


def parse_request(payload: Any, *, decoded: bool = False) -> HttpRequest:
    """Validate an ``http`` payload, or raise ``PermanentError`` saying which field is wrong;
    ``decoded``: the payload was just parsed from JSON (its ``json`` is not walked again)."""
    try:
        return HttpRequest.model_validate(payload, context=DECODED if decoded else None)
    except ValidationError as error:
        problems = "; ".join(validation_problems(error, whole="payload"))
        raise PermanentError(f"invalid http payload: {problems}") from None
