"""An endpoint that echoes the request never gets the request's secrets into the error text."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp import web

from tests.echo import CONTEXT, HOSTILE, basic_parts, echoing, forms, hostile, leaks, traces
from tests.test_http import CTX
from warren_cron.errors import TaskError
from warren_cron.redaction import REDACTED
from warren_cron.worker.http import EXCERPT_BYTES, EXCERPT_CHARS, HttpHandler

Handler = Callable[..., HttpHandler]
ENV_SECRET = 'envTok7Hq2xZp9Lw/+="k'
FILE_SECRET = "fileKeyQm4R8vT1z&<%>"
LITERAL_PASSWORD = "litPassW5eY3ru8!@"
BASIC = "Basic " + base64.b64encode(f"alice:{LITERAL_PASSWORD}".encode()).decode()
SECRETS = [ENV_SECRET, FILE_SECRET, BASIC, LITERAL_PASSWORD]


def secret_headers(tmp_path: Path) -> dict[str, object]:
    """One secret by env (under a name nobody would call sensitive), one by file, one literal."""
    (tmp_path / "api-key").write_text(FILE_SECRET + "\n")
    return {
        "X-Upstream": {"env": "HOOK_TOKEN"},
        "X-Api-Key": {"file": f"{tmp_path}/api-key"},
        "Authorization": BASIC,
    }


@pytest.fixture
def call(http_handler: Handler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Handler:
    """A handler of a worker that opened HOOK_* and ``tmp_path`` to tasks."""
    monkeypatch.setenv("HOOK_TOKEN", ENV_SECRET)
    return lambda: http_handler(http_secret_env="HOOK_*", http_secret_dir=tmp_path)


async def error_of(handler: HttpHandler, url: str, headers: dict[str, object]) -> str:
    """The text of the error the handler raised for ``url``."""
    with pytest.raises(TaskError) as caught:
        await handler({"url": url, "method": "GET", "headers": headers}, CTX)
    return str(caught.value)


@pytest.mark.parametrize("status", [302, 403, 500])
async def test_echoed_secrets_are_scrubbed_in_every_form_and_the_rest_of_the_body_kept(
    call: Handler, tmp_path: Path, status: int
) -> None:
    """Env and file secrets and a literal Basic Authorization, echoed as they are, in
    capitals, URL-encoded, base64 and JSON-escaped, leave only ``***`` behind."""
    async with echoing() as echo:
        text = await error_of(call(), f"{echo.url}/status/{status}", secret_headers(tmp_path))
    assert echo.seen[0]["X-Upstream"] == ENV_SECRET, "the endpoint did get the secret"
    assert leaks(text, SECRETS) == []
    assert f"HTTP {status}" in text and CONTEXT in text and REDACTED in text
    assert CTX.run_id in text, "what is not secret stays in the excerpt"


async def test_a_secret_across_the_excerpt_cut_is_hidden_whole(
    call: Handler, tmp_path: Path
) -> None:
    """The body is scrubbed before it is cut: a secret starting just before the cut leaves
    none of its characters."""
    body = ("word " * 100)[: EXCERPT_CHARS - 6] + ENV_SECRET + " tail"
    async with echoing(lambda request: body) as echo:
        text = await error_of(call(), f"{echo.url}/status/500", secret_headers(tmp_path))
    assert "word word" + REDACTED in text and ENV_SECRET[:4] not in text


async def test_a_secret_cut_by_the_read_limit_is_hidden_from_its_first_character(
    call: Handler, tmp_path: Path
) -> None:
    """Wide characters make the bytes read end before ``EXCERPT_CHARS`` characters, inside a
    secret: the start of it that was read is hidden too (the wide characters, outside
    printable ASCII, are one ``?``)."""
    wide = "\U0001f600" * (EXCERPT_CHARS - 3)
    assert len(wide.encode()) + len(ENV_SECRET[:12]) == EXCERPT_BYTES
    async with echoing(lambda request: wide + ENV_SECRET) as echo:
        text = await error_of(call(), f"{echo.url}/status/403", secret_headers(tmp_path))
    assert text.endswith(": ?" + REDACTED) and ENV_SECRET[:3] not in text


async def test_the_urls_password_and_query_values_are_scrubbed_from_an_echo(
    http_handler: Handler,
) -> None:
    """A URL's password goes out as Basic auth and its query in the request line: neither
    comes back in the error text, nor does the query in the URL it names."""
    async with echoing(said) as echo:
        url = echo.url.replace("//", "//bob:urlPassZ81x@") + "/status/401?token=qTok3nV4lue9&n=1"
        text = await error_of(http_handler(), url, {})
    assert leaks(text, ["urlPassZ81x", "bob:urlPassZ81x", "qTok3nV4lue9"]) == []
    assert "HTTP 401" in text and CONTEXT in text and "/status/401:" in text


def said(request: web.Request) -> str:
    """The request line and the Authorization header, decoded, at the start of the answer."""
    sent = request.headers.get("Authorization", "")
    return f"{CONTEXT} {request.path_qs} {' '.join(forms(sent) + basic_parts(sent))}"


@pytest.fixture
async def garbling() -> AsyncIterator[str]:
    """A TCP peer that answers a status line made of the request's Authorization header;
    its URL."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = (await reader.readuntil(b"\r\n\r\n")).decode()
        sent = next(line for line in request.splitlines() if line.startswith("Authorization"))
        writer.write(f"HTTP/1.1 2x0 {sent}\r\n\r\n".encode())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/status/200"
    server.close()
    await server.wait_closed()


async def test_a_malformed_answer_quoting_a_secret_is_scrubbed_from_the_client_error(
    call: Handler, tmp_path: Path, garbling: str
) -> None:
    """aiohttp quotes a bad status line in its error: the secret in it is scrubbed too."""
    text = await error_of(call(), garbling, secret_headers(tmp_path))
    assert "Bad status line" in text and leaks(text, SECRETS) == []


async def test_a_body_without_secrets_is_kept_as_it_was(http_handler: Handler) -> None:
    """No secret sent: the excerpt of an ordinary text is the body's start, unchanged."""
    body = f"{web.Request.__name__} failed. " * 50
    async with echoing(lambda request: body) as echo:
        text = await error_of(http_handler(), f"{echo.url}/status/404", {})
    assert text.endswith(": " + body[:EXCERPT_CHARS]) and REDACTED not in text


@pytest.mark.parametrize("form", HOSTILE)
async def test_an_echo_in_any_encoding_leaves_no_trace_of_a_secret(
    call: Handler, tmp_path: Path, form: str
) -> None:
    """MIME base64 split inside a secret, UTF-16 with or without its byte order mark, hex,
    HTML entities, ``\\u`` and percent escapes of every character, all mixed, reversed: no
    six characters of a secret survive in any form, and the endpoint's words stay."""
    async with echoing(hostile(form)) as echo:
        text = await error_of(call(), f"{echo.url}/status/403", secret_headers(tmp_path))
    assert echo.seen[0]["X-Upstream"] == ENV_SECRET, "the endpoint did get the secret"
    assert traces(text, SECRETS) == []
    assert text.startswith(f"HTTP 403 from GET {echo.url}/status/403: {CONTEXT}")


JSON_ERROR = '{"error": "invalid job id",\n "request_id": "3f2a9c4e-81b7-4d2e-9a5f-0c6b1e7d4a21"}'
HTML_503 = (
    "<html><head><title>503 Service Unavailable</title></head>\r\n"
    "<body>\tBack soon \u2014 caf\u00e9\x00\x1b[31m</body></html>"
)
#: (body, excerpt): as it was, but whitespace one space, any other run of characters outside
#: printable ASCII one ``?``.
ORDINARY = [
    (JSON_ERROR, JSON_ERROR.replace("\n", "")),
    (
        HTML_503,
        "<html><head><title>503 Service Unavailable</title></head> <body> Back soon ? caf?[31m"
        "</body></html>",
    ),
]


@pytest.mark.parametrize(("body", "excerpt"), ORDINARY, ids=["json", "html"])
async def test_an_ordinary_error_body_stays_readable_on_one_line_of_printable_ascii(
    call: Handler, tmp_path: Path, body: str, excerpt: str
) -> None:
    """A JSON error or an HTML 503 page reads as it was, on one line of printable ASCII: a
    line break in the excerpt cannot forge a log line, nor an escape recolour a terminal."""
    async with echoing(lambda request: body) as echo:
        text = await error_of(call(), f"{echo.url}/status/503", secret_headers(tmp_path))
    assert text.partition("/status/503: ")[2] == excerpt
