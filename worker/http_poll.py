"""An http task whose job outlives its request: with ``poll`` in its payload, an endpoint
that answers ``202 Accepted`` with a ``Location`` header (the job's status URL) is polled
every ``poll`` seconds until the job ends (docs/http-tasks.md#jobs-that-outlive-the-request).

Each answer ``200 {"state": "running", "progress": ...}`` is a heartbeat with that progress;
``{"state": "succeeded", "result": ...}`` ends the attempt with that result, ``{"state":
"failed", "error": "...", "permanent": false}`` fails it (retried by the plan unless
``permanent``). A status URL that does not answer ``CRON_HEARTBEAT_MISSES`` polls in a row
(network errors, timeouts, 408, 429, 5xx) leaves the attempt ``hung``, retried.

The status URL must be on the task URL's origin: the task's headers, its credentials among
them, go with every poll, and they go to no host the task did not name. The destination
policy judges it again all the same. The worker drives the polls, so the endpoint needs no
way to call back into the broker or the API, and a run handed over is polled by whichever
worker takes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError
from yarl import URL

from warren_cron.errors import PermanentError, RetryableError
from warren_cron.redaction import Scrubber
from warren_cron.worker.context import TaskContext
from warren_cron.worker.excerpt import excerpt

if TYPE_CHECKING:
    from warren_cron.worker.http import Answer

#: The largest status answer read: a state, a small progress, an error excerpt, a result.
STATUS_BYTES = 65_536
#: What a status answer must look like, for the error that says it did not.
EXPECTED = '{"state": "running" | "succeeded" | "failed", "progress": ..., "result": ...}'


class StatusUnanswered(RetryableError):
    """The status URL did not answer for as many polls as heartbeats may be missed."""

    reason: ClassVar[str] = "hung"


class JobState(BaseModel):
    """One answer of the status URL."""

    model_config = ConfigDict(extra="ignore")

    state: Literal["running", "succeeded", "failed"]
    progress: Any = None
    result: Any = None
    error: str | None = None
    permanent: bool = False


def status_url(task_url: URL, location: str | None, shown: str) -> URL:
    """The status URL a 202 names, resolved against the task's URL; a ``PermanentError``
    naming the fix when there is none, or when it leaves the task URL's origin."""
    if not location:
        raise PermanentError(
            f"HTTP 202 from {shown} without a Location header: with 'poll' set, the endpoint "
            "answers 202 with Location: <the job's status URL>, or 2xx once the work is done"
        )
    try:
        url = task_url.join(URL(location))
        same = url.origin() == task_url.origin()
    except ValueError:
        same = False
    if not same:
        raise PermanentError(
            f"HTTP 202 from {shown} names a status URL on another origin than "
            f"{task_url.origin()}: the task's headers go with each poll, so the status URL "
            "must be on the task URL's scheme, host and port"
        )
    return url


def job_state(answer: Answer, shown: str, scrub: Scrubber) -> JobState:
    """The job's state from a 2xx answer of its status URL, or a ``PermanentError`` that
    says what the answer should have been."""
    if len(answer.body) >= STATUS_BYTES:
        raise PermanentError(f"the status URL {shown} answered {STATUS_BYTES} bytes or more")
    try:
        return JobState.model_validate(scrubbed(orjson.loads(answer.body), scrub))
    except (orjson.JSONDecodeError, ValidationError):
        got = excerpt(answer.body, answer.charset, scrub, cut=False)[:200]
        raise PermanentError(
            f"the status URL {shown} answered HTTP {answer.status} without a job state: "
            f"expected {EXPECTED}, got {got!r}"
        ) from None


def scrubbed(data: Any, scrub: Scrubber) -> Any:
    """``data`` without the task's secrets an endpoint echoed in it: its progress and result
    go to history and pages. Read as JSON (escapes decoded), written again, scrubbed; a value
    the scrub leaves no JSON is refused."""
    text = orjson.dumps(data).decode()
    clean = scrub(text)
    if clean == text:
        return data
    try:
        return orjson.loads(clean)
    except orjson.JSONDecodeError:
        raise PermanentError("the status URL's answer holds the task's secrets") from None


def ended(state: JobState, ctx: TaskContext, shown: str, scrub: Scrubber) -> bool:
    """Take one state: a heartbeat while it runs, True once it succeeded, a failure raised."""
    if state.state == "running":
        try:
            ctx.heartbeat(state.progress)
        except ValueError as error:  # no JSON, or too large: the endpoint's to fix
            raise PermanentError(f"the status URL {shown}: {error}") from None
        return False
    if state.state == "succeeded":
        return True
    said = excerpt((state.error or "no error given").encode(), None, scrub, cut=False)[:500]
    kind = PermanentError if state.permanent else RetryableError
    raise kind(f"the job at {shown} failed: {said}")


def missed(count: int, misses: int, shown: str, error: RetryableError) -> int:
    """One more poll unanswered; ``StatusUnanswered`` once ``misses`` in a row."""
    if count + 1 >= misses:
        raise StatusUnanswered(
            f"the status URL {shown} did not answer {misses} polls in a row; last: {error}"
        )
    return count + 1


async def poll(
    get: Callable[[], Awaitable[Answer]],
    every: float,
    misses: int,
    ctx: TaskContext,
    shown: str,
    scrub: Scrubber,
) -> Any:
    """Poll with ``get`` (a 2xx answer, else an error) every ``every`` seconds until the job
    ends; its result."""
    unanswered = 0
    while True:
        await asyncio.sleep(every)
        try:
            answer = await get()
        except RetryableError as error:
            unanswered = missed(unanswered, misses, shown, error)
            continue
        unanswered = 0
        state = job_state(answer, shown, scrub)
        if ended(state, ctx, shown, scrub):
            return state.result
