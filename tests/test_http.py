"""The http handler: statuses map to outcomes, and the endpoint sees which fire it serves."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from topology.errors import PermanentError, RetryableError
from worker.context import TaskContext
from worker.http import HttpHandler

CTX = TaskContext(
    run_id="nightly@2026-01-01T00:00:00+00:00",
    task="http",
    schedule="nightly",
    scheduled_for=datetime(2026, 1, 1, tzinfo=UTC),
    attempt=2,
    redelivered=False,
    timeout_seconds=5,
)


def handler_answering(status: int, seen: list[httpx.Request] | None = None) -> HttpHandler:
    """An http handler whose endpoint answers every request with ``status``."""

    def answer(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return httpx.Response(status, text=f"status {status} body")

    return HttpHandler(httpx.AsyncClient(transport=httpx.MockTransport(answer)))


@pytest.mark.parametrize("status", [200, 201, 204])
async def test_2xx_succeeds(status: int) -> None:
    """A 2xx answer is a successful attempt."""
    assert await handler_answering(status)({"url": "http://svc/job"}, CTX) == {"status": status}


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503])
async def test_408_429_and_5xx_are_retryable(status: int) -> None:
    """Overload and server errors are retried, and the error names the status and body."""
    with pytest.raises(RetryableError, match=f"HTTP {status} .*status {status} body"):
        await handler_answering(status)({"url": "http://svc/job"}, CTX)


@pytest.mark.parametrize("status", [301, 302, 400, 401, 403, 404, 422])
async def test_3xx_and_other_4xx_are_permanent(status: int) -> None:
    """Redirects and client errors fail at once with the status and a body excerpt."""
    with pytest.raises(PermanentError, match=f"HTTP {status} "):
        await handler_answering(status)({"url": "http://svc/job"}, CTX)


async def test_cron_headers_are_sent_with_the_request() -> None:
    """The endpoint receives run id, attempt, schedule and scheduled time as headers."""
    seen: list[httpx.Request] = []
    payload = {"url": "http://svc/job", "method": "PUT", "headers": {"A": "b"}, "json": {"k": 1}}
    await handler_answering(200, seen)(payload, CTX)
    request = seen[0]
    assert request.method == "PUT" and request.headers["A"] == "b"
    assert request.headers["X-Cron-Run-Id"] == CTX.run_id
    assert request.headers["X-Cron-Attempt"] == "2"
    assert request.headers["X-Cron-Schedule"] == "nightly"
    assert request.headers["X-Cron-Scheduled-For"] == "2026-01-01T00:00:00+00:00"
    assert request.content == b'{"k":1}'


async def test_network_errors_are_retryable() -> None:
    """A refused connection is worth retrying."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    handler = HttpHandler(httpx.AsyncClient(transport=httpx.MockTransport(refuse)))
    with pytest.raises(RetryableError, match="ConnectError"):
        await handler({"url": "http://svc/job"}, CTX)


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ({}, "url: Field required"),
        ({"url": "ftp://x"}, "url"),
        ("http://x", "payload"),
        ({"url": "http://x", "json": {}, "body": "x"}, "either 'json' or 'body'"),
        ({"url": "http://x", "method": "BREW"}, "method"),
    ],
)
async def test_invalid_payloads_are_permanent_errors(payload: object, why: str) -> None:
    """A payload the handler cannot use fails at once, naming the field."""
    with pytest.raises(PermanentError, match=why):
        await handler_answering(200)(payload, CTX)
