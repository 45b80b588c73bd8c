"""The built-in ``http`` handler: call a webhook, map its status to the task's outcome.

2xx succeeds; 408, 429, 5xx, network errors and timeouts are retried; 3xx and every other
4xx fail at once with the status and a body excerpt.
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

from worker.context import TaskContext
from worker.errors import PermanentError, RetryableError

RETRYABLE_STATUSES = frozenset({408, 429})
EXCERPT_CHARS = 500
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


class HttpStatusError(RetryableError):
    """The endpoint answered with a status worth retrying (408, 429, 5xx)."""


class HttpStatusRejected(PermanentError):
    """The endpoint answered with a status no retry can fix (3xx, other 4xx)."""


def parse_request(payload: Any) -> HttpRequest:
    """Validate an ``http`` payload, or raise ``PermanentError`` saying which field is wrong."""
    try:
        return HttpRequest.model_validate(payload)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'payload'}: {e['msg']}"
            for e in error.errors(include_url=False, include_input=False)
        )
        raise PermanentError(f"invalid http payload: {problems}") from None


def cron_headers(ctx: TaskContext) -> dict[str, str]:
    """Headers that let the endpoint deduplicate and see which attempt this is."""
    headers = {
        "X-Cron-Run-Id": ctx.run_id,
        "X-Cron-Attempt": str(ctx.attempt),
        "X-Cron-Scheduled-For": ctx.scheduled_for.isoformat(),
    }
    if ctx.schedule is not None:
        headers["X-Cron-Schedule"] = ctx.schedule
    return headers


def check_status(request: HttpRequest, response: httpx.Response) -> None:
    """Raise unless the status is 2xx, naming the status and the start of the body."""
    status = response.status_code
    if 200 <= status < 300:
        return
    excerpt = response.text[:EXCERPT_CHARS]
    message = f"HTTP {status} from {request.method} {request.url}: {excerpt}"
    if status in RETRYABLE_STATUSES or status >= 500:
        raise HttpStatusError(message)
    raise HttpStatusRejected(message)


class HttpHandler:
    """Calls the payload's URL with a shared connection pool."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def __call__(self, payload: Any, ctx: TaskContext) -> dict[str, int]:
        """Send the request; return its status, or raise to fail the attempt."""
        request = parse_request(payload)
        timeout = min(request.timeout or ctx.timeout_seconds, ctx.timeout_seconds)
        try:
            response = await self._client.request(
                request.method,
                request.url,
                headers={**request.headers, **cron_headers(ctx)},
                json=request.json_body,
                content=request.body,
                timeout=timeout,
            )
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as error:
            raise PermanentError(f"cannot call {request.url}: {error}") from None
        except httpx.HTTPError as error:
            raise RetryableError(f"{type(error).__name__} calling {request.url}: {error}") from None
        check_status(request, response)
        return {"status": response.status_code}
