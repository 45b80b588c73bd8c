"""Where alerts go, and in what shape: each target turns a digest into the HTTP requests of
its format.

The generic webhook gets the digest's JSON as it always did; Slack gets a message (a text
fallback and blocks); PagerDuty and Opsgenie get one event per condition, opened and closed
under a key of the namespace and the condition, so a RESOLVED closes what the alert opened
(``paging.py``); the event webhook gets signed machine events (``events.py``). Secrets are
named by reference (``{"env": "NAME"}`` or ``{"file": "/path"}``) and read when a request
is built, so a rotated file takes effect at once; neither they nor the URLs that carry tokens
are logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import orjson

from warren_cron.monitor.alerts import Condition, Digest
from warren_cron.secret_sources import SecretSources
from warren_cron.webhook import SecretRef

JSON = {"Content-Type": "application/json"}
#: Slack refuses a section text longer than this, and a message of more than 50 blocks.
SLACK_TEXT_CHARS = 3000
SLACK_HEADER_CHARS = 150
SLACK_BLOCKS = 50
#: The monitor's own settings name the secrets: any variable or file of it may be used.
_SOURCES = SecretSources(Path("/"), ("*",))


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP request a target sends."""

    url: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=lambda: JSON)


class Target(Protocol):
    """A format and a destination."""

    @property
    def kind(self) -> str:
        """The ``cron_alerts_total`` label and the name in logs."""

    @property
    def safe(self) -> str:
        """Scheme and host of the destination, for logs."""

    def requests(self, digest: Digest, namespace: str) -> list[Request]:
        """The requests that say ``digest``; ``SecretUnavailable`` when a secret is missing."""


def safe_url(url: str) -> str:
    """Scheme and host of ``url``: chat webhooks carry their token in the path."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}/..."


def request_target(url: str) -> str:
    """The path and query of ``url`` as on the request line, which a signature covers."""
    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def read_secret(reference: SecretRef, setting: str) -> str:
    """The secret ``reference`` names; ``SecretUnavailable`` saying why not."""
    return _SOURCES.resolve(reference, setting)


def condition_key(namespace: str, change: Condition) -> str:
    """The key an incident tool opens and closes a condition's alert under."""
    return f"warren/{namespace}/{change.key}"


def failures_key(namespace: str, digest: Digest) -> str:
    """The key of one digest's failures: each digest opens an alert of its own."""
    first = digest.samples[0].run_id if digest.samples else "?"
    return f"warren/{namespace}/failures/{first}"


@dataclass(frozen=True, slots=True)
class Destination:
    """A target's URL, logged as its scheme and host only."""

    url: str

    @property
    def safe(self) -> str:
        """Scheme and host only: a token may be in the path."""
        return safe_url(self.url)


@dataclass(frozen=True, slots=True)
class GenericWebhook(Destination):
    """The digest's JSON (``Digest.body``), with a chat ``text`` line."""

    kind: str = "webhook"

    def requests(self, digest: Digest, namespace: str) -> list[Request]:
        """One POST of the digest."""
        return [Request(self.url, orjson.dumps(digest.body(namespace)))]


def slack_escape(text: str) -> str:
    """Text as Slack mrkdwn shows it literally: ``<!channel>`` in an error pings no one."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def slack_message(digest: Digest, namespace: str) -> dict[str, Any]:
    """An incoming-webhook message: ``text`` (the notification) and blocks: a header, then a
    section per line."""
    lines = digest.text(namespace).splitlines()
    firing = sum(change.firing for change in digest.conditions.values())
    title = f"warren {namespace}: {firing + digest.failures} alert(s)"
    sections: list[dict[str, Any]] = [
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _cut(slack_escape(line), SLACK_TEXT_CHARS)},
        }
        for line in lines[: SLACK_BLOCKS - 1]
    ]
    header = {
        "type": "header",
        "text": {"type": "plain_text", "text": _cut(title, SLACK_HEADER_CHARS)},
    }
    return {
        "text": _cut(slack_escape("\n".join(lines)), SLACK_TEXT_CHARS),
        "blocks": [header, *sections],
    }


@dataclass(frozen=True, slots=True)
class Slack(Destination):
    """A Slack incoming webhook."""

    kind: str = "slack"

    def requests(self, digest: Digest, namespace: str) -> list[Request]:
        """One message."""
        return [Request(self.url, orjson.dumps(slack_message(digest, namespace)))]
