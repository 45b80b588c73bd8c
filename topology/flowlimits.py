"""Flow limits as written and carried: a rate (``10/1s:5``), a key selector (a payload field
or ``@host``), and the ``limits`` block a schedule names in its spec and its task messages
carry to the workers (``worker/slots.py`` and ``worker/rates.py`` apply them).

A key is made from a message, so it is bounded here: a value longer than ``MAX_KEY_TEXT``
is replaced by a digest of itself, a missing or null value is ``-``, a value that is no
string or number is its JSON, digested when long. A value that may be a credential (a field
of a sensitive name, such as ``api_token``, or a URL with a password or a sensitive query
value) is always its digest: keys show in deferrals, history and connection names. Queue
names use a digest of the key in any case.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from yarl import URL

from warren_cron.redaction import masked_url, sensitive_param

#: Most attempts at once one key may have: each free slot looked for is a declaration.
MAX_SLOTS = 100
#: Longest key value kept as text; a longer one is named by a digest.
MAX_KEY_TEXT = 64
#: The key selector of an http task's destination host.
HOST = "@host"
_UNITS = {"s": 1, "m": 60, "h": 3600}
_RATE = re.compile(r"^(?P<n>\d{1,9})/(?P<every>\d{0,6})(?P<unit>[smh])(?::(?P<burst>\d{1,6}))?$")
_FIELD = re.compile(r"^\w{1,64}$")
RATE_FORM = "N/PERIOD[:BURST] with N and BURST at least 1 and PERIOD like 1s, 5m or h"
KEY_FORM = "a payload field name (letters, digits, _; at most 64) or @host"


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``limit`` starts per ``period`` seconds, ``burst`` at once."""

    limit: int
    period: float
    burst: int

    @property
    def window(self) -> float:
        """Seconds over which at most ``burst`` starts are let through."""
        return self.period * self.burst / self.limit

    @property
    def text(self) -> str:
        """The rate as written back: ``N/<seconds>s:BURST``."""
        return f"{self.limit}/{self.period:g}s:{self.burst}"


@lru_cache(maxsize=1024)
def parse_rate(text: str) -> Rate:
    """``N/PERIOD[:BURST]`` (burst defaults to N), or ValueError saying the form."""
    match = _RATE.match(text.strip())
    if match is None or int(match["n"]) < 1 or (match["burst"] or "1") == "0":
        raise ValueError(f"{text[:100]!r} is not {RATE_FORM}, e.g. 10/1s or 100/5m:5")
    n = int(match["n"])
    period = int(match["every"] or 1) * _UNITS[match["unit"]]
    if period < 1:
        raise ValueError(f"{text[:100]!r}: the period must be at least 1s")
    return Rate(n, period, int(match["burst"] or n))


def check_selector(selector: str) -> str:
    """``selector`` when it names a payload field or ``@host``, else ValueError."""
    if selector != HOST and not _FIELD.match(selector):
        raise ValueError(f"key {selector[:100]!r} is not {KEY_FORM}")
    return selector


def key_value(payload: object, selector: str) -> str:
    """The value ``selector`` picks from a payload, bounded (see the module's docstring)."""
    if not isinstance(payload, dict):
        return "-"
    if selector == HOST:
        url = payload.get("url")
        return url_host(url) if isinstance(url, str) else "-"
    value = payload.get(selector)
    # Keys name connections and show in deferrals and history: a credential (a sensitive
    # field's value, a URL with a password or token) is named by its digest, never as text.
    hidden = sensitive_param(selector) or (isinstance(value, str) and masked_url(value) != value)
    return _bounded(value, hidden)


def scoped_key(scope: str, selector: str | None, payload: object) -> str:
    """What a limit of ``scope`` counts a start under: the scope, or per value of ``selector``."""
    if selector is None:
        return scope
    return f"{scope}[{selector}={key_value(payload, selector)}]"


@lru_cache(maxsize=4096)
def url_host(url: str) -> str:
    """The lower-case host of an http(s) URL (every port of a host shares it), else ``-``."""
    try:
        parsed = URL(url)
    except (TypeError, ValueError):
        return "-"
    host = parsed.host if parsed.scheme in ("http", "https") else None
    return _bounded(host.lower()) if host else "-"


def _bounded(value: object, hidden: bool = False) -> str:
    if value is None:
        return "-"
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        text = str(value)
    else:
        try:
            text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError:
            text = repr(value)
    if len(text) <= MAX_KEY_TEXT and not hidden:
        return text
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]


def digest(text: str) -> str:
    """A short digest naming ``text`` in a queue name."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class FlowLimits(BaseModel):
    """A schedule's own limits, across every worker: at most ``concurrency`` attempts of its
    runs at once and at most ``rate`` starts, per value of ``key`` when given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    concurrency: int | None = Field(None, ge=1, le=MAX_SLOTS)
    rate: str | None = Field(None, max_length=40)
    key: str | None = Field(None, max_length=64)

    @field_validator("rate")
    @classmethod
    def _check_rate(cls, value: str | None) -> str | None:
        if value is not None:
            parse_rate(value)
        return value

    @field_validator("key")
    @classmethod
    def _check_key(cls, value: str | None) -> str | None:
        return None if value is None else check_selector(value)

    @model_validator(mode="after")
    def _check_some(self) -> FlowLimits:
        if self.concurrency is None and self.rate is None:
            raise ValueError("limits: give concurrency, rate or both")
        return self

    @property
    def parsed_rate(self) -> Rate | None:
        """``rate`` parsed; None without one."""
        return None if self.rate is None else parse_rate(self.rate)
