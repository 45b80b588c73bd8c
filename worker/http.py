"""The built-in ``http`` handler: call a webhook, map its status to the task's outcome.

2xx succeeds; 408, 429, 5xx, network errors and timeouts are retried; 3xx and every other
4xx fail at once with the status and a body excerpt. Every error text is scrubbed of the
secrets the request sent (``request_secrets``) before it leaves this module, whatever the
endpoint echoes: logs, failure records, history, alerts and pages all get the scrubbed text.
What the peer wrote is kept only as ``worker.excerpt`` allows: decoded, unescaped, scrubbed,
long token-like runs dropped, printable ASCII, so that no encoding of a secret survives.
Redirects are never followed: the destination policy judged the URL the task names, not
wherever a server points.

One aiohttp ``ClientSession`` serves every http task of a worker: connections are kept alive
and reused, no cookie is kept from one task to the next, and no proxy is taken from the
environment (a proxy would be the address connected to, defeating the destination check).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, ClassVar

import aiohttp
import orjson
import structlog
from yarl import URL

import warren_cron.tracing as tracing
from warren_cron.clock import utcnow
from warren_cron.errors import PermanentError, RetryableError
from warren_cron.redaction import MIN_PART, Scrubber, header_secrets, sensitive_header
from warren_cron.secret_sources import SecretSources
from warren_cron.signing import SIGNATURE_HEADER, sign
from warren_cron.webhook import HttpRequest, SecretRef, parse_request
from warren_cron.worker.context import TaskContext
from warren_cron.worker.destinations import DestinationPolicy
from warren_cron.worker.excerpt import excerpt, readable
from warren_cron.worker.http_poll import STATUS_BYTES, poll, status_url
from warren_cron.worker.resolver import PolicyResolver
from warren_cron.worker.retry_after import retry_after
from warren_cron.worker.settings import WorkerSettings

log = structlog.get_logger("warren_cron.worker.http")
RETRYABLE_STATUSES = frozenset({408, 429})
#: The statuses whose ``Retry-After`` header sets the next attempt's delay.
RETRY_AFTER_STATUSES = frozenset({429, 503})
EXCERPT_CHARS = 500
#: What is read of a failed answer's body: enough bytes for ``EXCERPT_CHARS`` characters.
EXCERPT_BYTES = EXCERPT_CHARS * 4
#: A body up to this size is read to its end so that the connection can be reused; past it
#: the connection is closed instead of reading on.
DRAIN_BYTES = 65_536
JSON_TYPE = {"Content-Type": "application/json"}
NO_CONTENT_TYPE = ("Content-Type",)


class HttpStatusError(RetryableError):
    """The endpoint answered with a status worth retrying (408, 429, 5xx)."""

    def __init__(self, message: str, status: int, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        #: Seconds the endpoint asked to wait (``Retry-After`` on a 429 or 503), else None.
        self.retry_after = retry_after


class HttpStatusRejected(PermanentError):
    """The endpoint answered with a status no retry can fix (3xx, other 4xx)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class HttpTimeout(RetryableError):
    """No complete answer within the attempt's timeout."""

    reason: ClassVar[str] = "timeout"


@dataclass(slots=True)  # not frozen: one is made per request, and frozen costs a µs
class Answer:
    """What an endpoint answered: its status, the start of its body, its ``Retry-After``,
    the charset its ``Content-Type`` names."""

    status: int
    body: bytes
    retry_after: float | None = None
    charset: str | None = None
    #: A 202's ``Location``: the job's status URL (``worker/http_poll.py``).
    location: str | None = None


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """What the worker's settings say about http tasks."""

    policy: DestinationPolicy
    secrets: SecretSources
    signing_secret: str | None = None
    #: Polls of a status URL that may go unanswered in a row (CRON_HEARTBEAT_MISSES).
    misses: int = 3


def http_options(settings: WorkerSettings) -> HttpOptions:
    """The http task's options from the worker's settings."""
    secret = settings.http_signing_secret
    return HttpOptions(
        settings.destination_policy(),
        SecretSources(settings.http_secret_dir, settings.http_secret_env),
        None if secret is None else secret.get_secret_value(),
        settings.heartbeat_misses,
    )


def cron_headers(ctx: TaskContext) -> dict[str, str]:
    """Headers that let the endpoint deduplicate and see which attempt this is."""
    headers = {
        "X-Cron-Run-Id": ctx.run_id,
        "X-Cron-Attempt": str(ctx.attempt),
        "X-Cron-Scheduled-For": iso_time(ctx.scheduled_for),
    }
    if ctx.schedule is not None:
        headers["X-Cron-Schedule"] = ctx.schedule
    return headers


@lru_cache(maxsize=256)
def iso_time(moment: datetime) -> str:
    """``moment`` in ISO 8601; remembered, since the tasks of one fire share their time."""
    return moment.isoformat()


@lru_cache(maxsize=256)
def client_timeout(seconds: float) -> aiohttp.ClientTimeout:
    """One request's timeout from its connect to the last byte of its answer (kept per value)."""
    return aiohttp.ClientTimeout(total=seconds)


def shown(url: URL) -> str:
    """The URL for error texts: without user, password and query, where tokens hide."""
    return str(url.with_user(None).with_query(None))


def why(error: Exception, url: URL, scrub: Scrubber) -> str:
    """An aiohttp error's text (it may quote the peer's answer), with the URL in it shown as
    ``shown`` shows it and the rest made ``readable`` (the request's secrets scrubbed)."""
    return shown(url).join(readable(part, scrub) for part in str(error).split(str(url)))


def request_secrets(request: HttpRequest, sent: dict[str, str], url: URL) -> Iterator[str]:
    """What the request sent that is secret: the values of its secret references and of its
    sensitive headers, the URL's password (sent as Basic auth) and its query's values."""
    for name, value in sent.items():
        if sensitive_header(name) or isinstance(request.headers.get(name), SecretRef):
            yield from header_secrets(value)
    if url.password:
        yield from (url.password, f"{url.user or ''}:{url.password}")
    query = (url.raw_query_string, *url.query.values())
    yield from (value for value in query if len(value) >= MIN_PART)


def check_status(method: str, url: URL, answer: Answer, scrub: Scrubber) -> None:
    """Raise unless the status is 2xx, naming the status and the start of the body's
    ``excerpt``, which is made whole before it is cut so that no secret straddles the cut."""
    status, body = answer.status, answer.body
    if 200 <= status < 300:
        return
    text = excerpt(body, answer.charset, scrub, cut=len(body) >= EXCERPT_BYTES)
    message = f"HTTP {status} from {method} {shown(url)}: {text[:EXCERPT_CHARS]}"
    if status in RETRYABLE_STATUSES or status >= 500:
        wait = answer.retry_after if status in RETRY_AFTER_STATUSES else None
        raise HttpStatusError(message, status, wait)
    raise HttpStatusRejected(message, status)


def encode_body(request: HttpRequest) -> bytes | None:
    """The request's body bytes: its JSON (compact, as orjson writes it) or its text."""
    if request.json_body is not None:
        return orjson.dumps(request.json_body)
    return None if request.body is None else request.body.encode()


async def read_body(response: aiohttp.ClientResponse, keep: int) -> bytes:
    """Read the body to its end (up to ``DRAIN_BYTES``) and return its first ``keep`` bytes."""
    kept, seen = b"", 0
    while seen <= DRAIN_BYTES and (chunk := await response.content.read(DRAIN_BYTES)):
        kept += chunk[: keep - len(kept)] if len(kept) < keep else b""
        seen += len(chunk)
    return kept


def names_type(headers: dict[str, str]) -> bool:
    """True when ``headers`` hold a Content-Type (the one we add first: it is the usual one)."""
    return "Content-Type" in headers or any(name.lower() == "content-type" for name in headers)


def auto_skipped(headers: dict[str, str], body: bytes | None) -> tuple[str, ...] | None:
    """The headers aiohttp must not add: Content-Type is what the payload says, so none is
    added for a body sent without one. Skipping costs aiohttp a header table per request,
    so only a request with a body and no type asks for it."""
    if body is None or names_type(headers):
        return None
    return NO_CONTENT_TYPE


def new_session(policy: DestinationPolicy) -> aiohttp.ClientSession:
    """The worker's one session: pooled keep-alive connections through the policy's resolver."""
    connector = aiohttp.TCPConnector(limit=0, resolver=PolicyResolver(policy))
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        headers={"User-Agent": "warren"},
        trust_env=False,
    )


class HttpHandler:
    """Calls the payload's URL through one shared session."""

    def __init__(self, session: aiohttp.ClientSession, options: HttpOptions) -> None:
        self._session = session
        self._options = options

    async def __call__(self, payload: Any, ctx: TaskContext) -> dict[str, Any]:
        """Send the request; return its status, or raise to fail the attempt."""
        # A worker's payloads come from decoded message bodies (``codec.decode``).
        request = parse_request(payload, decoded=True)
        url = URL(request.url, encoded=False)
        self._options.policy.check_host(url.raw_host or "")
        body = encode_body(request)
        headers = self.headers(request, ctx, url, body)
        scrub = Scrubber(request_secrets(request, headers, url))
        timeout = min(request.timeout or ctx.timeout_seconds, ctx.timeout_seconds)
        answer = await self._send(request.method, url, headers, body, timeout, scrub)
        check_status(request.method, url, answer, scrub)
        if answer.status == 202 and request.poll is not None:
            return await self._polled(request, ctx, url, answer.location, scrub)
        return {"status": answer.status}

    async def _polled(
        self,
        request: HttpRequest,
        ctx: TaskContext,
        url: URL,
        location: str | None,
        scrub: Scrubber,
    ) -> dict[str, Any]:
        """Poll the status URL a 202 named until the job ends (``worker/http_poll.py``)."""
        target = status_url(url, location, shown(url))
        self._options.policy.check_host(target.raw_host or "")
        get = request.model_copy(update={"method": "GET", "json_body": None, "body": None})
        headers = self.headers(get, ctx, target, None)
        every = request.poll or 1.0
        seconds = request.timeout or max(every, 10.0)

        async def once() -> Answer:
            got = await self._send("GET", target, headers, None, seconds, scrub, STATUS_BYTES)
            check_status("GET", target, got, scrub)
            return got

        result = await poll(once, every, self._options.misses, ctx, shown(target), scrub)
        return {"status": 202, "result": result}

    def headers(
        self, request: HttpRequest, ctx: TaskContext, url: URL, body: bytes | None
    ) -> dict[str, str]:
        """The headers sent: the payload's (secrets resolved), X-Cron-*, the signature."""
        headers = {name: self._value(v, f"header {name!r}") for name, v in request.headers.items()}
        if request.json_body is not None and not names_type(headers):
            headers.update(JSON_TYPE)
        headers.update(cron_headers(ctx))
        # The attempt's span is the endpoint's parent (docs/tracing.md); empty with tracing off.
        headers.update(tracing.outgoing())
        secret = request.signing_secret
        key = self._value(secret) if secret is not None else self._options.signing_secret
        if key is not None:
            headers[SIGNATURE_HEADER] = sign(key, request.method, url.raw_path_qs, body or b"")
        return headers

    def _value(self, value: str | SecretRef, use: str = "signing_secret") -> str:
        return value if isinstance(value, str) else self._options.secrets.resolve(value, use)

    async def _send(
        self,
        method: str,
        url: URL,
        headers: dict[str, str],
        body: bytes | None,
        seconds: float,
        scrub: Scrubber,
        keep: int = 0,
    ) -> Answer:
        try:
            async with self._session.request(
                method,
                url,
                headers=headers,
                data=body,
                allow_redirects=False,
                timeout=client_timeout(seconds),
                skip_auto_headers=auto_skipped(headers, body),
            ) as response:
                status = response.status
                if 200 <= status < 300:
                    answer = Answer(status, await read_body(response, keep))
                    if status == 202:
                        answer.location = response.headers.get("Location")
                    return answer
                wait = retry_after(response.headers.get("Retry-After"), utcnow())
                body = await read_body(response, EXCERPT_BYTES)
                return Answer(status, body, wait, response.charset)
        except aiohttp.InvalidURL as error:
            raise PermanentError(f"cannot call {shown(url)}: {why(error, url, scrub)}") from None
        except TimeoutError:
            raise HttpTimeout(f"no complete answer from {shown(url)} in {seconds}s") from None
        except aiohttp.ClientError as error:
            name = type(error).__name__
            raise RetryableError(f"{name} calling {shown(url)}: {why(error, url, scrub)}") from None
