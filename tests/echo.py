"""A hostile local endpoint for tests: answers a scripted status with everything it was sent,
as it is and in the encodings a careless or malicious service might use."""

from __future__ import annotations

import base64
import codecs
import json
import re
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import quote

from aiohttp import web

#: The start of every echo: what an error text must still show once the secrets are gone.
CONTEXT = "KEEP-THIS-CONTEXT: the endpoint refused"


@dataclass(frozen=True)
class Raw:
    """A body given as bytes, with the Content-Type it is sent under."""

    body: bytes
    content_type: str = "text/plain"


Body = Callable[[web.Request], "str | Raw"]


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
    body = echo.body(request)
    if isinstance(body, Raw):
        headers["Content-Type"] = body.content_type
        return web.Response(status=status, body=body.body, headers=headers)
    return web.Response(status=status, text=body, headers=headers)


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


def sent_values(request: web.Request) -> list[str]:
    """Every header value the request carried, and the parts of a Basic Authorization."""
    return [*request.headers.values(), *basic_parts(request.headers.get("Authorization", ""))]


def per_char(template: str) -> Callable[[str], str]:
    """An encoder writing every character of a value through ``template`` (``&#{};``)."""
    return lambda value: "".join(template.format(ord(c)) for c in value)


def mixed(value: str) -> str:
    """Each character in the next of five forms: decimal and hex entities, ``\\u``, ``%``,
    and as it is."""
    coders: list[Callable[[str], str]] = [
        per_char("&#{};"),
        per_char("&#x{:x};"),
        per_char("\\u{:04x}"),
        percent,
        str,
    ]
    return "".join(coders[n % 5](c) for n, c in enumerate(value))


def percent(value: str) -> str:
    """Every byte of a value percent-encoded, letters too."""
    return "".join(f"%{byte:02X}" for byte in value.encode())


#: How a hostile peer writes each value it echoes, by name (text forms).
TEXT_FORMS: dict[str, Callable[[str], str]] = {
    "hex": lambda value: value.encode().hex(),
    "HEX": lambda value: value.encode().hex().upper(),
    "html-decimal": per_char("&#{};"),
    "html-hex": per_char("&#x{:x};"),
    "json-u": per_char("\\u{:04x}"),
    "percent": percent,
    "mixed": mixed,
    "reversed": lambda value: value[::-1],
}
#: The bytes a body is sent in, by name: UTF-16 with and without its byte order mark.
BYTE_FORMS = {
    "utf-16-le-bom": (codecs.BOM_UTF16_LE, "utf-16-le", "text/plain"),
    "utf-16-be-bom": (codecs.BOM_UTF16_BE, "utf-16-be", "text/plain"),
    "utf-16-le": (b"", "utf-16-le", "application/json"),
    "utf-16-be": (b"", "utf-16-be", "text/plain; charset=utf-8"),
    "utf-16-declared": (b"", "utf-16-be", "text/plain; charset=utf-16be"),
}
#: Bytes before each value in a MIME base64 block: 72 characters of base64, so that the line
#: break at column 76 falls inside the value.
MIME_PAD = b"x" * 54
HOSTILE = ["mime-base64", *TEXT_FORMS, *BYTE_FORMS]


def hostile(form: str) -> Body:
    """An echo of every value sent, each in the given form, after ``CONTEXT``."""

    def body(request: web.Request) -> str | Raw:
        values = sent_values(request)
        if form == "mime-base64":
            blocks = (base64.encodebytes(MIME_PAD + value.encode()).decode() for value in values)
            # A blank line after the words, as a MIME part's headers end.
            return f"{CONTEXT}\r\n\r\n" + "\n".join(blocks).replace("\n", "\r\n")
        if form in TEXT_FORMS:
            return f"{CONTEXT} " + "|".join(map(TEXT_FORMS[form], values))
        bom, codec, content_type = BYTE_FORMS[form]
        text = f"{CONTEXT} " + "|".join(values)
        return Raw(bom + text.encode(codec), content_type)

    return body


def traces(text: str, secrets: Iterable[str]) -> list[str]:
    """What ``leaks`` finds, and 6 characters of a secret in a row in any form ``HOSTILE``
    writes, in MIME base64 across a line break, or spelled out between other characters."""
    found = leaks(text, secrets)
    joined = re.sub(r"\s+", "", text).lower()
    squeezed = re.sub(r"[^a-z0-9]", "", joined)
    for secret in secrets:
        pieces = [secret[n : n + 6] for n in range(len(secret) - 5)]
        coded = {code(piece).lower() for piece in pieces for code in TEXT_FORMS.values()}
        coded |= {part.lower() for part in base64_parts(secret)}
        found += sorted(piece for piece in coded if piece in joined)
        spelled = re.sub(r"[^a-z0-9]", "", secret.lower())
        found += sorted(
            spelled[n : n + 8] for n in range(len(spelled) - 7) if spelled[n : n + 8] in squeezed
        )
    return found


def base64_parts(secret: str) -> set[str]:
    """The base64 of a secret at each of three alignments in a longer text, its ends cut."""
    parts = set()
    for shift in (0, 1, 2):
        text = base64.b64encode(bytes(shift) + secret.encode()).decode()
        parts.add(text[4 : len(text) - 4])
    return {part for part in parts if len(part) >= 8}
