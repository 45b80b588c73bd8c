"""The built-in ``http`` handler: call a webhook, map its status to the task's outcome.

2xx succeeds; 408, 429, 5xx, network errors and timeouts are retried; 3xx and every other
4xx fail at once with the status and a body excerpt.
"""

from __future__ import annotations

from typing import Any

import httpx

from topology.errors import PermanentError, RetryableError
from topology.webhook import HttpRequest, parse_request
from worker.context import TaskContext

RETRYABLE_STATUSES = frozenset({408, 429})
EXCERPT_CHARS = 500


class HttpStatusError(RetryableError):
    """The endpoint answered with a status worth retrying (408, 429, 5xx)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class HttpStatusRejected(PermanentError):
    """The endpoint answered with a status no retry can fix (3xx, other 4xx)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


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
        raise HttpStatusError(message, status)
    raise HttpStatusRejected(message, status)


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
