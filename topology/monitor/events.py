"""The signed event webhook: a digest as machine events, signed like the http task's requests.

Each POST carries ``{"namespace", "events": [...], "omitted_failures"}`` and the header
``X-Cron-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>`` over
``"<t>.POST.<path and query>."`` and the body (``topology/signing.py``): a receiver checks
it with ``verify_signature``. The event types:

- ``run.failed``: a task reached the failed queue (data: run_id, schedule, task, attempts,
  reason, failed_at);
- ``schedule.missed``: no success within the schedule's expect_success_within (data: schedule);
- ``scheduler.down``: no scheduler leads, or the leader is behind;
- ``failed_queue.threshold``: the failed queue holds more than its threshold;
- ``retry_queue.stalled``: a retry queue's head outstays its TTL (data: queue).

Conditions come as ``firing`` and then ``resolved``; failures beyond the digest's samples are
counted in ``omitted_failures``, as grouping keeps a burst to a few requests.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import orjson

from warren_cron.clock import now_text
from warren_cron.monitor.alerts import Condition, Digest, alert_fields
from warren_cron.monitor.targets import (
    JSON,
    Destination,
    Request,
    read_secret,
    request_target,
)
from warren_cron.signing import SIGNATURE_HEADER, sign
from warren_cron.webhook import SecretRef

#: Condition keys (before any ``:``) as event types, and the field the rest of the key is.
EVENT_TYPES = {
    "scheduler.down": ("scheduler.down", None),
    "failed-queue": ("failed_queue.threshold", None),
    "no-success": ("schedule.missed", "schedule"),
    "stalled": ("retry_queue.stalled", "queue"),
}


def condition_event(change: Condition) -> dict[str, Any]:
    """One condition change as an event."""
    prefix, _, rest = change.key.partition(":")
    kind, field = EVENT_TYPES.get(prefix, (prefix, None))
    data = {field: rest} if field else {}
    status = "firing" if change.firing else "resolved"
    return _event(kind, status, change.detail, data)


def _event(kind: str, status: str, detail: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "type": kind,
        "status": status,
        "at": now_text(),
        "detail": detail,
        "data": data,
    }


def digest_events(digest: Digest, namespace: str) -> dict[str, Any]:
    """The body of one event POST."""
    events = [condition_event(change) for change in digest.conditions.values()]
    for record in digest.samples:
        fields = alert_fields(record)
        events.append(_event("run.failed", "firing", f"{fields['reason']}", fields))
    omitted = digest.failures - len(digest.samples)
    return {"namespace": namespace, "events": events, "omitted_failures": omitted}


@dataclass(frozen=True, slots=True)
class EventWebhook(Destination):
    """Signed events to ``url``."""

    secret: SecretRef
    kind: str = "events"

    def requests(self, digest: Digest, namespace: str) -> list[Request]:
        """One signed POST of the digest's events."""
        secret = read_secret(self.secret, "CRON_ALERT_EVENTS_SECRET")
        body = orjson.dumps(digest_events(digest, namespace))
        signature = sign(secret, "POST", request_target(self.url), body)
        return [Request(self.url, body, {**JSON, SIGNATURE_HEADER: signature})]
