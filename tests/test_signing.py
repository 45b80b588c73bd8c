"""Signed requests: what the endpoint receives verifies with the shipped function, and nothing
else does (another body, path, time or secret)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from tests.test_http import CTX
from tests.webhook import Endpoint, serve
from warren_cron.signing import SignatureError, sign, verify_signature
from warren_cron.worker.http import HttpHandler

Handler = Callable[..., HttpHandler]
SECRET = "s3cret-signing-key"
#: The worked example of docs/http-tasks.md: these inputs give this header (checked with openssl
#: too).
EXAMPLE = (SECRET, "POST", "/hooks/report?source=warren", b'{"event":"nightly"}', 1767225600)
EXAMPLE_HEADER = "t=1767225600,v1=f5ce5d8c34609ae4e048b17b859019adfbe8fd79533961fddaf62529408204b3"


def test_the_documented_example_gives_the_documented_header() -> None:
    """The worked example on the http task's page, byte for byte."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "http-tasks.md").read_text()
    assert f"X-Cron-Signature: {EXAMPLE_HEADER}" in page
    secret, method, target, body, t = EXAMPLE
    assert sign(secret, method, target, body, t) == EXAMPLE_HEADER
    assert verify_signature(EXAMPLE_HEADER, secret, method, target, body, now=t + 10) == t


async def signed_request(
    call: HttpHandler, payload: Mapping[str, object]
) -> tuple[str, dict[str, str], bytes]:
    """Send one task to a local endpoint; return the path, headers and body it received."""
    with serve(Endpoint()) as endpoint:
        await call({**payload, "url": f"{endpoint.url}/hooks/report?source=warren"}, CTX)
    [received] = endpoint.requests
    return received


async def test_a_signed_request_verifies_with_the_shipped_function(http_handler: Handler) -> None:
    """CRON_HTTP_SIGNING_SECRET signs method, path, query and body; the receiver's check passes."""
    call = http_handler(http_signing_secret=SECRET)
    path, headers, body = await signed_request(call, {"json": {"event": "nightly"}})
    header = headers["X-Cron-Signature"]
    signed_at = verify_signature(header, SECRET, "POST", path, body)
    assert abs(signed_at - time.time()) < 60
    assert path == "/hooks/report?source=warren" and body == b'{"event":"nightly"}'


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"body": b'{"event":"forged"}'}, "does not match"),
        ({"target": "/hooks/other?source=warren"}, "does not match"),
        ({"method": "PUT"}, "does not match"),
        ({"secrets": "another-secret"}, "does not match"),
        ({"skew": 302}, "outside 300s"),
        ({"skew": -302}, "outside 300s"),
        ({"header": None}, "no X-Cron-Signature"),
        ({"header": "v1=abc"}, "must read"),
    ],
)
async def test_a_changed_request_is_rejected(
    http_handler: Handler, change: dict[str, object], why: str
) -> None:
    """Another body, path, method, secret or a time outside the window fails verification."""
    call = http_handler(http_signing_secret=SECRET)
    path, headers, body = await signed_request(call, {"json": {"event": "nightly"}})
    args: dict[str, object] = {
        "header": headers["X-Cron-Signature"],
        "secrets": SECRET,
        "method": "POST",
        "target": path,
        "body": body,
    }
    args.update(change)
    now = time.time() + float(args.pop("skew", 0))  # type: ignore[arg-type]
    with pytest.raises(SignatureError, match=why):
        verify_signature(**args, now=now)  # type: ignore[arg-type]


async def test_a_rotated_secret_verifies_against_either(http_handler: Handler) -> None:
    """A receiver lists the new and the old secret while the worker switches."""
    path, headers, body = await signed_request(http_handler(http_signing_secret=SECRET), {})
    secrets = ["the-new-one", SECRET]
    assert verify_signature(headers["X-Cron-Signature"], secrets, "POST", path, body)


async def test_a_payload_signing_secret_overrides_the_worker_s(
    http_handler: Handler, tmp_path: Path
) -> None:
    """``signing_secret = { file = ... }`` signs with that secret, not the worker's."""
    (tmp_path / "hook").write_text("per-schedule-secret\n")
    call = http_handler(http_signing_secret=SECRET, http_secret_dir=tmp_path)
    payload = {"signing_secret": {"file": str(tmp_path / "hook")}}
    path, headers, body = await signed_request(call, payload)
    verify_signature(headers["X-Cron-Signature"], "per-schedule-secret", "POST", path, body)
    with pytest.raises(SignatureError):
        verify_signature(headers["X-Cron-Signature"], SECRET, "POST", path, body)


async def test_without_a_secret_nothing_is_signed(http_handler: Handler) -> None:
    """No signing secret, no signature header."""
    _, headers, _ = await signed_request(http_handler(), {})
    assert "X-Cron-Signature" not in headers
