"""What an error text may keep of an endpoint's answer: no encoding of the request's secrets.

A peer may echo what it was sent in any encoding, so scrubbing the forms a secret is known to
take is not enough. An excerpt is made by one rule instead:

1. The bytes are decoded: by their byte order mark, else as UTF-16 or UTF-32 when their zero
   bytes say so, else by the charset the ``Content-Type`` names, else as UTF-8.
2. The text is unescaped, again while that changes it (``UNESCAPE_ROUNDS`` times at most):
   HTML entities (``&#115;``, ``&#x73;``, ``&amp;``), backslash escapes (``\\u0073``,
   ``\\x73``, ``\\163``, ``\\/``) and percent escapes (``%73``). The request's secrets are
   scrubbed before and after each round, so a secret is caught in whichever form the peer
   wrapped it; an escape still left after the last round becomes ``?``.
3. Every run of base64- or hex-looking characters (letters, digits, ``+/=_``) longer than
   ``LONG_RUN``, with the lines of them that follow it (the rest of a MIME base64 block),
   becomes ``[token]``, whatever encoding made it: a long secret survives in none, known or
   not.
4. Only printable ASCII is kept: a run of whitespace is one space, a run of any other
   character one ``?`` (no line break forges a log line, no escape reaches a terminal).

The caller cuts the result to its length (``EXCERPT_CHARS`` in ``worker.http``).
"""

from __future__ import annotations

import codecs
import html
import re
from urllib.parse import unquote

from warren_cron.redaction import Scrubber

#: Token-like runs longer than this are dropped, whatever encoding made them (base64 of 25
#: bytes or more, hex of 17); a UUID's parts (12 at most), words and short ids stay.
LONG_RUN = 32
DROPPED = "[token]"
UNESCAPE_ROUNDS = 8
#: UTF-32 first: its little-endian mark starts with UTF-16's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_BACKSLASH = re.compile(
    r"\\(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|x([0-9a-fA-F]{2})|([0-7]{3})|([^0-9A-Za-z\s]))"
)
_ESCAPE = re.compile(r"&#[xX]?[0-9a-fA-F]+;?|%[0-9a-fA-F]{2}|\\[uUx0-7][0-9a-fA-F]*")
_TOKENISH = "A-Za-z0-9+/=_"
_LONG = re.compile(
    rf"(?<![{_TOKENISH}])[{_TOKENISH}]{{{LONG_RUN + 1},}}(?:[ \t]*\r?\n[ \t]*[{_TOKENISH}]+)*"
)
_SPACE = re.compile(r"\s+")
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]+")


def excerpt(body: bytes, charset: str | None, scrub: Scrubber, cut: bool) -> str:
    """What may be shown of ``body`` (see the module's rule); ``cut`` says the body was read
    only in part, so a secret's start at its end is hidden too."""
    return readable(decoded(body, charset), scrub, cut).strip()


def readable(text: str, scrub: Scrubber, cut: bool = False) -> str:
    """A peer's text unescaped and scrubbed, long token-like runs dropped, printable ASCII."""
    text = _LONG.sub(DROPPED, unescaped(text, scrub, cut))
    return _UNPRINTABLE.sub("?", _SPACE.sub(" ", text))


def decoded(body: bytes, charset: str | None) -> str:
    """``body`` as text: by its byte order mark, its zero bytes, ``charset``, else UTF-8."""
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return body[len(bom) :].decode(codec, "replace")
    try:
        return body.decode(wide(body) or charset or "utf-8", "replace")
    except (LookupError, ValueError, TypeError):  # no such codec, or not one of text
        return body.decode("utf-8", "replace")


def wide(body: bytes) -> str | None:
    """UTF-32 or UTF-16 (and which byte order) when ``body``'s zero bytes fall as ASCII text in
    it would put them; None for a body in an 8-bit or ASCII-compatible encoding."""
    zeros = [_zeros(body[n::4]) for n in range(4)]
    if min(zeros[1:]) > 0.5 > zeros[0]:
        return "utf-32-le"
    if min(zeros[:3]) > 0.5 > zeros[3]:
        return "utf-32-be"
    even, odd = _zeros(body[::2]), _zeros(body[1::2])
    if odd > 0.25 and odd > 4 * even:
        return "utf-16-le"
    return "utf-16-be" if even > 0.25 and even > 4 * odd else None


def _zeros(part: bytes) -> float:
    return part.count(0) / len(part) if part else 0.0


def unescaped(text: str, scrub: Scrubber, cut: bool) -> str:
    """``text`` unescaped round after round, scrubbed before and after each."""
    text = scrub(text, cut)
    for _ in range(UNESCAPE_ROUNDS):
        plain = _unescape(text)
        if plain == text:
            return text
        text = scrub(plain, cut)
    # Nested deeper than the rounds: what is still escaped could hide a secret.
    return _ESCAPE.sub("?", text)


def _unescape(text: str) -> str:
    """One round: HTML entities, then backslash escapes, then percent escapes."""
    return unquote(_BACKSLASH.sub(_character, html.unescape(text)), errors="replace")


def _character(match: re.Match[str]) -> str:
    """The character a backslash escape stands for (``?`` for none)."""
    code, octal, literal = match[1] or match[2] or match[3], match[4], match[5]
    if literal is not None:
        return literal
    number = int(code, 16) if code is not None else int(octal, 8)
    return chr(number) if number < 0x110000 else "?"
