"""An http task whose endpoint answers 202 with a status URL, polled until the job ends,
against a real local endpoint: heartbeats with progress, the result, failures, a status URL
that stops answering, and hostile answers (another origin, no Location, no JSON, too big)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from tests.test_http import CTX
from warren_cron.errors import PermanentError, RetryableError
from warren_cron.webhook import parse_request
from warren_cron.worker.context import TaskContext
from warren_cron.worker.http import HttpHandler
from warren_cron.worker.http_poll import StatusUnanswered

Handler = Callable[..., HttpHandler]
SECRET = "Bearer s3cr3t-t0ken-value"


def context() -> TaskContext:
    """A fresh attempt's context (its heartbeats its own), as the worker builds one."""
    return copy.copy(CTX)


@dataclass
class Job:
    """A job endpoint: POST /start answers 202 and ``location``; GET /status answers the
    scripted ``answers`` in turn (the last repeats), each a status and a body."""

    answers: list[tuple[int, Any]]
    location: str | None = "/status?id=7"
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    url: str = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Answer one request as scripted, noting it."""
        self.seen.append((request.method, request.path_qs, dict(request.headers)))
        if request.path == "/start":
            headers = {} if self.location is None else {"Location": self.location}
            return web.Response(status=202, headers=headers)
        polls = sum(1 for method, *_ in self.seen if method == "GET")
        status, body = self.answers[min(polls, len(self.answers)) - 1]
        text = body if isinstance(body, str) else web.json_response(body).text
        return web.Response(status=status, text=text, content_type="application/json")

    def polls(self) -> list[tuple[str, str, dict[str, str]]]:
        """The status requests received."""
        return [seen for seen in self.seen if seen[0] == "GET"]


@pytest.fixture
async def job() -> AsyncIterator[Callable[..., Job]]:
    """Serves the jobs made on a free loopback port, stopped afterwards."""
    runners: list[web.AppRunner] = []

    async def make(*answers: tuple[int, Any], **options: Any) -> Job:
        served = Job(list(answers), **options)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", served.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = runner.addresses[0][1]
        served.url = f"http://127.0.0.1:{port}"
        return served

    yield make  # type: ignore[misc]
    for runner in runners:
        await runner.cleanup()


def task(served: Job, **more: Any) -> dict[str, Any]:
    """An http task's payload starting the job, polled every second."""
    headers = {"Authorization": SECRET}
    return {"url": served.url + "/start", "poll": 1, "headers": headers, **more}


async def test_a_job_is_polled_with_heartbeats_until_it_succeeds_with_its_result(
    http_handler: Handler, job: Any
) -> None:
    """Two running answers are two heartbeats with their progress; the third ends the
    attempt with the job's result; each poll carries the task's headers, signed as a GET."""
    served = await job(
        (200, {"state": "running", "progress": {"done": 1, "of": 3}}),
        (200, {"state": "running", "progress": {"done": 2, "of": 3}}),
        (200, {"state": "succeeded", "result": {"rows": 3}}),
    )
    ctx = context()
    handler = http_handler(http_signing_secret="sign-me")
    assert await handler(task(served), ctx) == {"status": 202, "result": {"rows": 3}}
    assert (ctx.beats.count, ctx.beats.progress) == (2, b'{"done":2,"of":3}')
    polls = served.polls()
    assert [path for _, path, _ in polls] == ["/status?id=7"] * 3
    headers = polls[0][2]
    assert headers["Authorization"] == SECRET and headers["X-Cron-Run-Id"] == ctx.run_id
    assert headers["X-Cron-Signature"] != served.seen[0][2]["X-Cron-Signature"]


async def test_without_poll_a_202_is_a_success_as_before(http_handler: Handler, job: Any) -> None:
    """A task that does not ask to poll takes a 202 as any 2xx: nothing is polled."""
    served = await job((200, {"state": "running"}))
    payload = {k: v for k, v in task(served).items() if k != "poll"}
    assert await http_handler()(payload, context()) == {"status": 202}
    assert served.polls() == []


async def test_a_failed_job_is_retried_unless_permanent_and_its_echo_is_scrubbed(
    http_handler: Handler, job: Any
) -> None:
    """A failed state fails the attempt (retryable, or for good when it says permanent),
    naming the job's error with the task's credential scrubbed from it."""
    echo = {"state": "failed", "error": f"refused {SECRET}"}
    served = await job((200, echo))
    with pytest.raises(RetryableError, match=r"the job at .* failed: refused") as caught:
        await http_handler()(task(served), context())
    assert "s3cr3t" not in str(caught.value)
    served = await job((200, {**echo, "permanent": True}))
    with pytest.raises(PermanentError, match="failed: refused"):
        await http_handler()(task(served), context())


async def test_a_status_url_that_stops_answering_leaves_the_attempt_hung(
    http_handler: Handler, job: Any
) -> None:
    """One 503 between running answers is forgiven; three in a row (the heartbeat misses)
    fail the attempt as hung, retried."""
    served = await job(
        (200, {"state": "running"}), (503, "busy"), (200, {"state": "running"}), (503, "busy")
    )
    with pytest.raises(StatusUnanswered, match="did not answer 3 polls in a row") as caught:
        await http_handler(heartbeat_misses=3)(task(served), context())
    assert caught.value.reason == "hung"
    assert len(served.polls()) == 6


@pytest.mark.parametrize(
    ("location", "says"),
    [
        (None, "without a Location header"),
        ("http://127.0.0.2:1/latest", "on another origin"),
        ("https://127.0.0.1/status", "on another origin"),
        ("//evil.example/status", "on another origin"),
        ("javascript:alert(1)", "on another origin"),
    ],
)
async def test_a_status_url_the_task_did_not_name_is_refused_and_never_called(
    http_handler: Handler, job: Any, location: str | None, says: str
) -> None:
    """No Location, or one on another scheme, host or port: the attempt fails for good,
    saying what to answer, and the task's headers go nowhere else."""
    served = await job((200, {"state": "succeeded"}), location=location)
    with pytest.raises(PermanentError, match=says):
        await http_handler()(task(served), context())
    assert served.polls() == []


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        ((200, "<html>ok</html>"), "without a job state: expected"),
        ((200, {"state": "paused"}), "without a job state"),
        ((200, {"state": "running", "progress": "x" * 5000}), "over 4096"),
        ((200, {"state": "running", "pad": "x" * 70_000}), "65536 bytes or more"),
        ((404, "gone"), "HTTP 404"),
    ],
)
async def test_a_status_answer_that_is_no_job_state_fails_at_once_saying_what_to_send(
    http_handler: Handler, job: Any, answer: tuple[int, Any], says: str
) -> None:
    """HTML, an unknown state, a progress too large, a huge answer, a 4xx: a permanent
    error that names the problem, after one poll."""
    served = await job(answer)
    with pytest.raises(PermanentError, match=says):
        await http_handler()(task(served), context())
    assert len(served.polls()) == 1


async def test_poll_is_checked_with_the_payload() -> None:
    """An interval under a second, or over an hour, is refused when the task is written."""
    for wrong in (0.5, 3601):
        with pytest.raises(PermanentError, match="poll: Input should be"):
            parse_request({"url": "http://example.com/", "poll": wrong})


async def test_a_progress_or_result_echoing_the_tasks_credential_keeps_no_trace_of_it(
    http_handler: Handler, job: Any
) -> None:
    """A hostile status URL puts the task's token in its progress (plain, and every
    character JSON-escaped) and in its result: history and pages would show them, so
    neither reaches the heartbeat or the run's result."""
    token = SECRET.removeprefix("Bearer ")
    escaped = "".join(f"\\u{ord(c):04x}" for c in token)
    served = await job(
        (200, '{"state": "running", "progress": {"note": "' + escaped + '"}}'),
        (200, {"state": "succeeded", "result": {"echo": SECRET}}),
    )
    ctx = context()
    done = await http_handler()(task(served), ctx)
    assert token not in str(done) and done["result"] == {"echo": "***"}
    assert ctx.beats.progress is not None and token.encode() not in ctx.beats.progress
