"""A hostile local endpoint for tests: answers a scripted status with everything it was sent,
as it is and in the encodings a careless or malicious service might use."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import quote

from aiohttp import web

#: The start of every echo: what an error text must still show once the secrets are gone.
CONTEXT = "KEEP-THIS-CONTEXT: the endpoint refused"
Body = Callable[[web.Request], str]


def forms(value: str) -> list[str]:
    """A value as an echoing peer may write it: as it is, in capitals, URL-encoded, base64,
    JSON-escaped."""
    coded = base64.b64encode(value.encode()).decode()
    return [value, value.upper(), quote(value, safe=""), coded, json.dumps(value)[1:-1]]


def basic_parts(value: str) -> list[str]:
    """``user:password`` and the password inside a Basic Authorization value."""
    scheme, _, credentials = value.partition(" ")
    if scheme.lower() != "basic":
        return []
    pair = base64.b64decode(credentials).decode()
    return [pair, pair.partition(":")[2]]


def everything(request: web.Request) -> str:
    """Every header value in every form, the headers as JSON and the request line, densely
    and many times over, so that any cut falls inside some secret."""
    values = [*request.headers.values(), *basic_parts(request.headers.get("Authorization", ""))]
    block = "|".join(f for value in values for f in forms(value))
    block += f"|{json.dumps(dict(request.headers))}|{request.method} {request.path_qs}|"
    return f"{CONTEXT} {block * 6}"


@dataclass
class Echo:
    """What the echo endpoint answers, and the base URL it listens at."""

    body: Body = everything
    url: str = ""
    seen: list[dict[str, str]] = field(default_factory=list)


async def _answer(echo: Echo, request: web.Request) -> web.Response:
    """The status the path ends with (``/status/500``), the echo as body."""
    echo.seen.append(dict(request.headers))
    status = int(request.match_info["status"])
    headers = {"Location": "/elsewhere"} if 300 <= status < 400 else {}
    return web.Response(status=status, text=echo.body(request), headers=headers)


@asynccontextmanager
async def echoing(body: Body = everything) -> AsyncIterator[Echo]:
    """Run an echo endpoint on a free port of 127.0.0.1 for the block."""
    echo = Echo(body)
    app = web.Application()

    async def answer(request: web.Request) -> web.Response:
        return await _answer(echo, request)

    app.router.add_route("*", "/status/{status}", answer)
    async with on_loopback(app) as url:
        echo.url = url
        yield echo


@asynccontextmanager
async def on_loopback(app: web.Application) -> AsyncIterator[str]:
    """Serve ``app`` on a free port of 127.0.0.1 for the block; yields its base URL."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def leaks(text: str, secrets: Iterable[str]) -> list[str]:
    """The forms of ``secrets`` found in ``text``, and any 8 characters of a secret in a row
    (a secret cut in two)."""
    lowered = text.lower()
    found = [f for s in secrets for f in forms(s) if f.lower() in lowered]
    pieces = {s[n : n + 8].lower() for s in secrets for n in range(len(s) - 7)}
    return found + sorted(piece for piece in pieces if piece in lowered)
