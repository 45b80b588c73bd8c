"""Which HTTP headers carry secrets, and how a payload is shown to people without them.

Failure records keep a webhook's headers as they were sent, so that a replay still works;
everything that shows a record to a person (``warren failed``, the monitor's logs and alerts, the
dashboard) passes its payload through ``redact_payload`` first. A secret reference such as
``{"env": "API_TOKEN"}`` names where the secret lives, not the secret, and is shown as it is.

A text written by someone else, such as the body of an endpoint's answer that echoes the
request, goes through a ``Scrubber`` of the secrets that request sent before it is kept.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from collections.abc import Iterable, Mapping
from functools import cached_property
from urllib.parse import quote, quote_plus, unquote_plus, urlsplit, urlunsplit

import orjson

REDACTED = "***"
_SENSITIVE_NAMES = frozenset(
    {"authorization", "cookie", "set-cookie", "proxy-authorization", "x-api-key"}
)
_SENSITIVE_PARTS = ("token", "secret", "password")


def sensitive_header(name: str) -> bool:
    """Tell whether a header of this name usually carries a credential."""
    lowered = name.lower()
    return lowered in _SENSITIVE_NAMES or any(part in lowered for part in _SENSITIVE_PARTS)


#: Query parameters that usually carry a credential, beyond the header names' parts.
_SENSITIVE_PARAM_PARTS = ("key", "sig", "auth", "pass", "credential")


def sensitive_param(name: str) -> bool:
    """Tell whether a URL query parameter of this name usually carries a credential."""
    lowered = name.lower()
    return sensitive_header(lowered) or any(part in lowered for part in _SENSITIVE_PARAM_PARTS)


def redact_headers(headers: Mapping[str, object]) -> dict[str, object]:
    """Return ``headers`` with the literal value of every sensitive header replaced."""
    return {
        name: REDACTED if isinstance(value, str) and sensitive_header(name) else value
        for name, value in headers.items()
    }


def redact_payload(payload: object) -> object:
    """Return a copy of an ``http`` task's payload fit to show: its sensitive headers, URL
    password and sensitive query values masked; other payloads as they are."""
    if not isinstance(payload, Mapping):
        return payload
    shown = dict(payload)
    if isinstance(payload.get("headers"), Mapping):
        shown["headers"] = redact_headers(payload["headers"])
    if isinstance(payload.get("url"), str):
        shown["url"] = masked_url(payload["url"])
    return shown


def masked_url(url: str) -> str:
    """``url`` with its password and the values of sensitive query parameters masked."""
    try:
        parts = urlsplit(url)
    except ValueError:  # unparsable (a broken IPv6 host): nothing in it can be told safe
        return REDACTED
    user, at, host = parts.netloc.rpartition("@")
    netloc = f"{user.partition(':')[0]}:{REDACTED}@{host}" if at and ":" in user else parts.netloc
    query = "&".join(map(masked_pair, parts.query.split("&"))) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def masked_pair(pair: str) -> str:
    """A query's ``name=value`` with the value masked when the name is a sensitive one."""
    name, equals, value = pair.partition("=")
    # The name as a server reads it: ``access%5Ftoken`` is ``access_token``.
    sensitive = sensitive_param(unquote_plus(name))
    return f"{name}={REDACTED}" if equals and value and sensitive else pair


def redact_task(data: object) -> object:
    """Return a task envelope (decoded JSON) with its ``http`` payload fit to show."""
    if not isinstance(data, Mapping) or "payload" not in data:
        return data
    return {**data, "payload": redact_payload(data["payload"])}


def redact_body(body: bytes) -> bytes:
    """Return a message body fit to show: a task envelope's secrets hidden, else as it is."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    shown = redact_task(data)
    return body if shown is data else orjson.dumps(shown)


#: Parts taken out of a secret (a Basic password, a cookie's value, an encoding's middle) that
#: are shorter than this are left alone: scrubbing every ``1`` would blank the text. A whole
#: secret is scrubbed whatever its length.
MIN_PART = 4
_URLSAFE = str.maketrans("+/", "-_")


def header_secrets(value: str) -> list[str]:
    """A sensitive header's value and the credentials inside it a peer could echo alone."""
    scheme, _, credentials = value.strip().partition(" ")
    found = [value, credentials.strip()]
    if scheme.lower() == "basic":
        found += _basic(credentials.strip())
    found += [pair.partition("=")[2].strip() for pair in value.split(";")]  # cookies
    return [part for part in found if part == value or len(part) >= MIN_PART]


def _basic(credentials: str) -> list[str]:
    try:
        pair = base64.b64decode(credentials, validate=True).decode("latin-1")
    except (binascii.Error, ValueError):
        return []
    return [pair, pair.partition(":")[2]]


def encodings(secret: str) -> set[str]:
    """How a secret may be echoed: as it is, reversed, URL-, JSON- and HTML-escaped, in hex
    and in base64."""
    escaped = orjson.dumps(secret).decode()[1:-1]
    found = {quote(secret, safe=""), quote_plus(secret), escaped, escaped.replace("/", "\\/")}
    found |= {html.escape(secret), secret[::-1], secret.encode().hex()}
    found |= _base64(secret.encode())
    return {part for part in found if len(part) >= MIN_PART} | {secret}


def _base64(secret: bytes) -> set[str]:
    """The base64 of a secret alone, and the part of it that is the same wherever the secret
    sits in a longer text encoded as a whole (three alignments, their ends cut)."""
    found = {base64.b64encode(secret).decode().rstrip("=")}
    for shift in (0, 1, 2):
        text = base64.b64encode(bytes(shift) + secret).decode()
        end = len(text) - (4 if (shift + len(secret)) % 3 else 0)
        found.add(text[4 if shift else 0 : end])
    return found | {part.translate(_URLSAFE) for part in found}


class Scrubber:
    """Replaces the given secrets, in every encoding ``encodings`` knows and in any case,
    with ``REDACTED``; a form of ``SPREAD_FROM`` letters and digits or more also when other
    characters sit between its letters and digits (``s-e-c-r-e-t``, a UTF-16 text read as
    bytes, base64 broken into lines). One is made for every request and most succeed:
    ``secrets`` (a generator, say) is read only once a text needs scrubbing."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = secrets

    @cached_property
    def _forms(self) -> list[str]:
        # Longest first: a secret inside a longer one must not leave the rest behind.
        forms = {form for secret in self._secrets if secret for form in encodings(secret)}
        return sorted(forms, key=len, reverse=True)

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        return re.compile("|".join(map(re.escape, self._forms)), re.IGNORECASE)

    @cached_property
    def _spread(self) -> re.Pattern[str] | None:
        squeezed = {_NOT_ALNUM.sub("", form).lower() for form in self._forms}
        long = sorted((s for s in squeezed if len(s) >= SPREAD_FROM), key=len, reverse=True)
        return re.compile("|".join(long)) if long else None

    def __call__(self, text: str, cut: bool = False) -> str:
        """``text`` without the secrets; ``cut`` says it was cut short, so a secret's start at
        its end is hidden too."""
        if not self._forms:
            return text
        text = _without_spread(self._pattern.sub(REDACTED, text), self._spread)
        return _without_started(text, self._forms) if cut else text


#: Forms with fewer letters and digits than this are matched only as they are: spread out,
#: a short one would match across ordinary words.
SPREAD_FROM = 8
_NOT_ALNUM = re.compile("[^0-9a-zA-Z]")


def _without_spread(text: str, spread: re.Pattern[str] | None) -> str:
    """``text`` with every span whose letters and digits, read alone, make a form hidden."""
    if spread is None:
        return text
    where = [m.start() for m in re.finditer("[0-9a-zA-Z]", text)]
    squeezed = "".join(text[n] for n in where).lower()
    kept, start = [], 0
    for match in spread.finditer(squeezed):
        kept += [text[start : where[match.start()]], REDACTED]
        start = where[match.end() - 1] + 1
    return "".join(kept) + text[start:]


def _without_started(text: str, forms: list[str]) -> str:
    """``text`` with a secret's first characters at its very end hidden."""
    lowered = text.lower()
    started = max(
        (
            n
            for form in forms
            for n in range(len(form) - 1, 0, -1)
            if lowered.endswith(form[:n].lower())
        ),
        default=0,
    )
    return text[: len(text) - started] + REDACTED if started else text
