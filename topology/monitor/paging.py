"""Incident tools: PagerDuty Events API v2 and Opsgenie's alert API.

Each condition opens an alert under ``warren/<namespace>/<condition>`` (PagerDuty's
``dedup_key``, Opsgenie's ``alias``) and its RESOLVED closes it; a digest of failures opens
one alert of its own, which people close. ``scheduler.down`` is always the highest severity:
nothing runs while it fires.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson

from warren_cron.clock import now_text
from warren_cron.monitor.alerts import Condition, Digest
from warren_cron.monitor.scheduler_down import SCHEDULER_DOWN
from warren_cron.monitor.targets import (
    JSON,
    Destination,
    Request,
    condition_key,
    failures_key,
    read_secret,
)
from warren_cron.webhook import SecretRef

#: PagerDuty's limits: a summary of 1024 characters, a dedup_key of 255.
PD_SUMMARY_CHARS = 1024
PD_KEY_CHARS = 255
#: Opsgenie's limits: message 130, alias 512, description 15000, note 25000.
OG_MESSAGE_CHARS = 130
OG_ALIAS_CHARS = 512
OG_DESCRIPTION_CHARS = 15000
OG_NOTE_CHARS = 25000
SOURCE = "warren monitor"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _failures_line(digest: Digest, namespace: str) -> str:
    return digest.text(namespace).splitlines()[-1]


def _failure_details(digest: Digest, namespace: str) -> dict[str, Any]:
    body = digest.body(namespace)
    return {key: body[key] for key in ("count", "by_reason", "by_schedule", "failures")}


@dataclass(frozen=True, slots=True)
class PagerDuty(Destination):
    """Events API v2: ``trigger`` and ``resolve`` with a ``dedup_key``."""

    routing_key: SecretRef
    severity: str
    kind: str = "pagerduty"

    def requests(self, digest: Digest, namespace: str) -> list[Request]:
        """An event per condition, one for the failures."""
        key = read_secret(self.routing_key, "CRON_ALERT_PAGERDUTY_ROUTING_KEY")
        events = [self._condition(key, change, namespace) for change in digest.conditions.values()]
        if digest.failures:
            summary = _failures_line(digest, namespace)
            details = _failure_details(digest, namespace)
            events.append(
                self._trigger(
                    key, failures_key(namespace, digest), summary, "run.failed", details, namespace
                )
            )
        return [Request(self.url, orjson.dumps(event)) for event in events]

    def _condition(self, key: str, change: Condition, namespace: str) -> dict[str, Any]:
        dedup = _cut(condition_key(namespace, change), PD_KEY_CHARS)
        if not change.firing:
            return {"routing_key": key, "event_action": "resolve", "dedup_key": dedup}
        kind = change.key.partition(":")[0]
        return self._trigger(key, dedup, change.detail, kind, change.fields(), namespace)

    def _trigger(
        self, key: str, dedup: str, summary: str, kind: str, details: dict[str, Any], namespace: str
    ) -> dict[str, Any]:
        severity = "critical" if kind == SCHEDULER_DOWN else self.severity
        payload = {
            "summary": _cut(f"[{namespace}] {summary}", PD_SUMMARY_CHARS),
            "source": namespace,
            "severity": severity,
            "timestamp": now_text(),
            "component": "warren",
            "group": namespace,
            "class": kind,
            "custom_details": details,
        }
        return {
            "routing_key": key,
            "event_action": "trigger",
            "dedup_key": _cut(dedup, PD_KEY_CHARS),
            "payload": payload,
        }


@dataclass(frozen=True, slots=True)
class Opsgenie(Destination):
    """Alert API v2: create an alert with an ``alias``; close it by that alias (``url`` is
    the API's base URL)."""

    api_key: SecretRef
    priority: str
    kind: str = "opsgenie"

    def requests(self, digest: Digest, namespace: str) -> list[Request]:
        """A create or close per condition, a create for the failures."""
        headers = {
            **JSON,
            "Authorization": f"GenieKey {read_secret(self.api_key, 'CRON_ALERT_OPSGENIE_API_KEY')}",
        }
        requests = [
            self._condition(change, namespace, headers) for change in digest.conditions.values()
        ]
        if digest.failures:
            details = {
                k: orjson.dumps(v).decode() for k, v in _failure_details(digest, namespace).items()
            }
            line = _failures_line(digest, namespace)
            alias = failures_key(namespace, digest)
            requests.append(self._create(alias, line, details, self.priority, headers))
        return requests

    def _condition(self, change: Condition, namespace: str, headers: dict[str, str]) -> Request:
        alias = _cut(condition_key(namespace, change), OG_ALIAS_CHARS)
        if change.firing:
            priority = "P1" if change.key == SCHEDULER_DOWN else self.priority
            details = {"condition": change.key}
            return self._create(alias, f"[{namespace}] {change.detail}", details, priority, headers)
        base = self.url.rstrip("/")
        url = f"{base}/v2/alerts/{quote(alias, safe='')}/close?identifierType=alias"
        body = {"source": SOURCE, "note": _cut(f"RESOLVED: {change.detail}", OG_NOTE_CHARS)}
        return Request(url, orjson.dumps(body), headers)

    def _create(
        self, alias: str, text: str, details: dict[str, str], priority: str, headers: dict[str, str]
    ) -> Request:
        body = {
            "message": _cut(text, OG_MESSAGE_CHARS),
            "alias": _cut(alias, OG_ALIAS_CHARS),
            "description": _cut(text, OG_DESCRIPTION_CHARS),
            "tags": ["warren", alias.split("/")[1]],
            "details": details,
            "entity": "warren",
            "source": SOURCE,
            "priority": priority,
        }
        return Request(f"{self.url.rstrip('/')}/v2/alerts", orjson.dumps(body), headers)
