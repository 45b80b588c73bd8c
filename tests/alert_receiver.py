"""A real aiohttp receiver on 127.0.0.1 for alert targets: records each request, answers as
the service it stands for does, or hostilely (slow, 500, echoing what it got)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from tests.echo import on_loopback


@dataclass(frozen=True)
class Received:
    """One request as it arrived."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON."""
        return orjson.loads(self.body)


#: The answer to a request: status and body.
Answer = Callable[[Received], tuple[int, bytes]]


def echo(request: Received) -> tuple[int, bytes]:
    """A hostile answer: 400 quoting every header and the body back."""
    return 400, orjson.dumps({"headers": request.headers, "body": request.body.decode()})


@dataclass
class Receiver:
    """What the receiver answers, and what it got."""

    answer: Answer = lambda _: (200, b"ok")
    delay: float = 0.0
    requests: list[Received] = field(default_factory=list)
    url: str = ""

    async def handle(self, request: web.Request) -> web.Response:
        """Record, wait ``delay``, answer."""
        got = Received(
            request.method, request.raw_path, dict(request.headers), await request.read()
        )
        self.requests.append(got)
        await asyncio.sleep(self.delay)
        status, body = self.answer(got)
        return web.Response(status=status, body=body, content_type="application/json")


@asynccontextmanager
async def receiving(receiver: Receiver) -> AsyncIterator[Receiver]:
    """Serve ``receiver`` on a free loopback port for the block."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", receiver.handle)
    async with on_loopback(app) as url:
        receiver.url = url
        yield receiver
