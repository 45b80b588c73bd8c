"""Signed webhook requests: how the worker signs them and how a receiver checks them.

Each request of the ``http`` task carries, when a signing secret is set::

    X-Cron-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>

The HMAC is keyed with the secret's UTF-8 bytes and taken over
``"<t>.<METHOD>.<path and query>."`` (ASCII, the request target exactly as on the request line)
followed by the raw body bytes. The time makes a captured request useless after the
tolerance window; the method and target stop a signature being moved to another call.

This module needs nothing but the standard library: a Python receiver imports it
(``from topology.signing import verify_signature``) or copies it.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Iterable

SIGNATURE_HEADER = "X-Cron-Signature"
#: How far a signature's time may be from the receiver's clock, either way, by default.
DEFAULT_TOLERANCE_SECONDS = 300


class SignatureError(ValueError):
    """A request whose signature is missing, malformed, too old or wrong."""


def signed_bytes(timestamp: int, method: str, target: str, body: bytes) -> bytes:
    """The bytes the HMAC covers: ``<t>.<METHOD>.<path and query>.`` then the body."""
    return f"{timestamp}.{method.upper()}.{target}.".encode() + body


def signature(secret: str, timestamp: int, method: str, target: str, body: bytes) -> str:
    """The hex HMAC-SHA256 of one request."""
    message = signed_bytes(timestamp, method, target, body)
    return hmac.digest(secret.encode(), message, "sha256").hex()


def sign(secret: str, method: str, target: str, body: bytes, timestamp: int | None = None) -> str:
    """The ``X-Cron-Signature`` value of one request, signed now unless ``timestamp`` is given."""
    t = int(time.time()) if timestamp is None else timestamp
    return f"t={t},v1={signature(secret, t, method, target, body)}"


def parse_header(header: str) -> tuple[int, list[str]]:
    """The time and the ``v1`` signatures of a header value; ``SignatureError`` if malformed."""
    fields = [part.strip().partition("=") for part in header.split(",")]
    times = [value for key, _, value in fields if key == "t"]
    signatures = [value for key, _, value in fields if key == "v1"]
    if len(times) != 1 or not times[0].isdigit() or not signatures:
        raise SignatureError(f"{SIGNATURE_HEADER} must read t=<unix seconds>,v1=<hex>")
    return int(times[0]), signatures


def verify_signature(
    header: str | None,
    secrets: str | Iterable[str],
    method: str,
    target: str,
    body: bytes,
    *,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> int:
    """Check a request's ``X-Cron-Signature``; return its time, or raise ``SignatureError``.

    ``secrets`` may list several (the new and the old one while a secret is rotated);
    ``target`` is the path and query exactly as received (aiohttp: ``request.raw_path``).
    Comparisons take constant time.
    """
    if not header:
        raise SignatureError(f"no {SIGNATURE_HEADER} header")
    timestamp, signatures = parse_header(header)
    clock = time.time() if now is None else now
    if abs(clock - timestamp) > tolerance_seconds:
        raise SignatureError(f"signed at {timestamp}, outside {tolerance_seconds}s of now")
    keys = [secrets] if isinstance(secrets, str) else list(secrets)
    expected = [signature(key, timestamp, method, target, body) for key in keys]
    given = [value.encode("utf-8", "replace") for value in signatures]
    if not any(hmac.compare_digest(e.encode(), g) for e in expected for g in given):
        raise SignatureError("signature does not match: wrong secret, or the request changed")
    return timestamp
