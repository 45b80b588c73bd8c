"""The http handler against a real local endpoint: statuses, timeouts, headers, reuse."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from tests.webhook import Endpoint, serve
from warren_cron.envelope import Envelope
from warren_cron.errors import PermanentError, RetryableError
from warren_cron.worker.attempt import Outcome, run_attempt
from warren_cron.worker.context import TaskContext
from warren_cron.worker.handlers import LazyHttp, builtin_registry
from warren_cron.worker.http import HttpHandler, HttpTimeout, http_options, new_session
from warren_cron.worker.settings import WorkerSettings

CTX = TaskContext(
    run_id="nightly@2026-01-01T00:00:00+00:00",
    task="http",
    schedule="nightly",
    scheduled_for=datetime(2026, 1, 1, tzinfo=UTC),
    attempt=2,
    redelivered=False,
    timeout_seconds=5,
)

Handler = Callable[..., HttpHandler]


@pytest.mark.parametrize("status", [200, 201, 204])
async def test_2xx_succeeds(http_handler: Handler, status: int) -> None:
    """A 2xx answer is a successful attempt."""
    with serve(Endpoint(statuses=[status])) as endpoint:
        assert await http_handler()({"url": endpoint.url}, CTX) == {"status": status}


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503])
async def test_408_429_and_5xx_are_retryable(http_handler: Handler, status: int) -> None:
    """Overload and server errors are retried, and the error names the status and body."""
    with (
        serve(Endpoint(statuses=[status])) as endpoint,
        pytest.raises(RetryableError, match=f"HTTP {status} .*not here!") as caught,
    ):
        await http_handler()({"url": endpoint.url}, CTX)
    assert caught.value.status == status  # type: ignore[attr-defined]


@pytest.mark.parametrize("status", [301, 302, 400, 401, 403, 404, 422])
async def test_3xx_and_other_4xx_are_permanent(http_handler: Handler, status: int) -> None:
    """Redirects and client errors fail at once with the status and a body excerpt."""
    with (
        serve(Endpoint(statuses=[status])) as endpoint,
        pytest.raises(PermanentError, match=f"HTTP {status} .*not here!"),
    ):
        await http_handler()({"url": endpoint.url}, CTX)


async def test_cron_headers_and_the_json_body_are_sent() -> None:
    """The endpoint receives method, headers, run id, attempt, schedule, time and compact JSON."""
    payload = {"url": "", "method": "PUT", "headers": {"A": "b"}, "json": {"k": 1}}
    with serve(Endpoint()) as endpoint:
        options = http_options(WorkerSettings())
        async with new_session(options.policy) as session:
            await HttpHandler(session, options)({**payload, "url": f"{endpoint.url}/j"}, CTX)
    [(path, headers, body)] = endpoint.requests
    assert (endpoint.calls[0][0], path, headers["A"], body) == ("PUT", "/j", "b", b'{"k":1}')
    assert headers["Content-Type"] == "application/json"
    assert headers["X-Cron-Run-Id"] == CTX.run_id
    assert headers["X-Cron-Attempt"] == "2"
    assert headers["X-Cron-Schedule"] == "nightly"
    assert headers["X-Cron-Scheduled-For"] == "2026-01-01T00:00:00+00:00"


async def test_a_payload_s_own_content_type_is_kept_for_json(http_handler: Handler) -> None:
    """A JSON body with its own media type keeps it."""
    payload = {"json": [1], "headers": {"content-type": "application/vnd.api+json"}}
    with serve(Endpoint()) as endpoint:
        await http_handler()({**payload, "url": endpoint.url}, CTX)
    [(_, headers, _)] = endpoint.requests
    assert headers["content-type"] == "application/vnd.api+json"


async def test_a_text_body_is_sent_as_given_with_no_content_type_added(
    http_handler: Handler,
) -> None:
    """A ``body`` goes out byte for byte; only the payload's own headers say what it is."""
    with serve(Endpoint()) as endpoint:
        await http_handler()({"url": endpoint.url, "body": "a=1&b=2"}, CTX)
    [(_, headers, body)] = endpoint.requests
    assert body == b"a=1&b=2" and "Content-Type" not in headers


async def test_connections_are_reused_from_one_task_to_the_next(http_handler: Handler) -> None:
    """Keep-alive: three tasks to one endpoint share one connection."""
    call = http_handler()
    with serve(Endpoint(keep_alive=True)) as endpoint:
        for _ in range(3):
            await call({"url": endpoint.url}, CTX)
    assert len({port for _, port in endpoint.calls}) == 1


async def test_a_slow_endpoint_times_out_as_the_payload_says(http_handler: Handler) -> None:
    """The payload's timeout bounds the attempt; a timeout is retryable, reason ``timeout``."""
    with (
        serve(Endpoint(delay=2)) as endpoint,
        pytest.raises(HttpTimeout, match=r"in 0\.3s") as caught,
    ):
        await http_handler()({"url": endpoint.url, "timeout": 0.3}, CTX)
    assert caught.value.reason == "timeout"


async def test_a_refused_connection_is_retryable(http_handler: Handler) -> None:
    """Nothing listening: a network error, worth retrying."""
    with serve(Endpoint()) as endpoint:
        url = endpoint.url
    with pytest.raises(RetryableError, match="ClientConnectorError"):
        await http_handler()({"url": url}, CTX)


async def test_a_redirect_is_not_followed(http_handler: Handler) -> None:
    """A 302 fails the task; the place it points to receives nothing."""
    with (
        serve(Endpoint(), host="127.0.0.2") as elsewhere,
        serve(Endpoint(statuses=[302], location=f"{elsewhere.url}/x")) as endpoint,
        pytest.raises(PermanentError, match="HTTP 302"),
    ):
        await http_handler(http_deny="127.0.0.2/32")({"url": endpoint.url}, CTX)
    assert len(endpoint.requests) == 1 and elsewhere.requests == []


async def test_error_texts_leave_out_the_query_and_user_info(http_handler: Handler) -> None:
    """A token in the query or a password in the URL stays out of failure records."""
    with serve(Endpoint(statuses=[404])) as endpoint:
        url = endpoint.url.replace("//", "//user:pa55@") + "/hook?token=T0KEN"
        with pytest.raises(PermanentError) as caught:
            await http_handler()({"url": url}, CTX)
    assert "T0KEN" not in str(caught.value) and "pa55" not in str(caught.value)
    assert f"{endpoint.url}/hook" in str(caught.value)


@pytest.mark.parametrize(
    ("payload", "why"),
    [
        ({}, "url: Field required"),
        ({"url": "ftp://x"}, "url"),
        ("http://x", "payload"),
        ({"url": "http://x", "json": {}, "body": "x"}, "either 'json' or 'body'"),
        ({"url": "http://x", "method": "BREW"}, "method"),
        ({"url": "http://exa mple/"}, "characters no host name has"),
        ({"url": "http://x:99999/"}, "port is outside"),
        ({"url": "http://x", "headers": {"A": 3}}, "header 'A' must be printable ASCII"),
        ({"url": "http://x", "headers": {"A": {"env": "A", "file": "/a"}}}, "env = "),
        ({"url": "http://x", "headers": {"A": {"file": "rel"}}}, "file"),
        ({"url": "http://x", "signing_secret": "literal"}, "signing_secret"),
        ({"url": "http://x", "headers": {"Host": "admin.internal"}}, "set by the worker"),
        ({"url": "http://x", "headers": {"transfer-encoding": "chunked"}}, "set by the worker"),
        ({"url": "http://x", "headers": {"X-A\n": "v"}}, "header name 'X-A\\\\n' is not"),
        ({"url": "http://x", "headers": {"A": {"env": "TOKEN\n"}}}, "header 'A': env"),
    ],
)
async def test_invalid_payloads_are_permanent_errors(
    http_handler: Handler, payload: object, why: str
) -> None:
    """A payload the handler cannot use fails at once, naming the field."""
    with pytest.raises(PermanentError, match=why):
        await http_handler()(payload, CTX)


@pytest.mark.parametrize("value", ["Bearer s3cret\n", "Bearer s3cret\r\n", "a\nInjected: 1"])
async def test_a_header_value_with_a_line_end_fails_at_once_naming_the_header_not_the_value(
    http_handler: Handler, value: str
) -> None:
    """A trailing newline too (``$`` matches before one): refused before anything is sent,
    as a permanent error naming the header, instead of retries that aiohttp refuses alike."""
    with serve(Endpoint()) as endpoint, pytest.raises(PermanentError) as caught:
        await http_handler()({"url": endpoint.url, "headers": {"X-Token": value}}, CTX)
    assert "header 'X-Token' must be printable ASCII on one line" in str(caught.value)
    assert "s3cret" not in str(caught.value) and endpoint.requests == []


async def test_the_task_timeout_bounds_an_http_attempt_without_one_of_its_own() -> None:
    """The http task sets its own timer (no second one around it): a payload without a
    timeout still ends at the task's, retryable with reason ``timeout``, naming the URL."""
    http = LazyHttp(WorkerSettings())
    registry = builtin_registry(http)
    ctx = TaskContext(
        run_id="r",
        task="http",
        schedule=None,
        scheduled_for=datetime(2026, 1, 1, tzinfo=UTC),
        attempt=1,
        redelivered=False,
        timeout_seconds=0.3,
    )
    try:
        with serve(Endpoint(delay=2)) as endpoint:
            envelope = Envelope(
                task="http",
                run_id="r",
                scheduled_for=ctx.scheduled_for,
                payload={"url": endpoint.url},
            )
            result = await run_attempt(registry, envelope, ctx)
    finally:
        await http.aclose()
    assert registry.get("http").times_itself  # type: ignore[union-attr]
    assert (result.outcome, result.reason) == (Outcome.RETRYABLE, "timeout")
    assert result.error is not None and "in 0.3s" in result.error
