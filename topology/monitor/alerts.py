"""Alerts: grouped into digests, rate limited, and retried while a target is down.

Consuming never waits for the webhook: a failure is added to the pending digest in memory (a
few counters and a handful of samples, however long the outage) and the sender posts it when
both the group wait after its first item and the minimum interval since the last alert have
passed. A webhook that fails is retried with backoff; the digest keeps growing meanwhile, so
a thousand failures become a handful of alerts with counts, not a thousand.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp
import structlog

from warren_cron.errors import SecretUnavailable
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.records import FailedRecord
from warren_cron.runtime.metrics import ALERTS

if TYPE_CHECKING:
    from warren_cron.monitor.targets import Request, Target

log = structlog.get_logger("monitor")
#: Failures listed one by one in an alert; the rest are counted.
SAMPLES = 10
MAX_BACKOFF_SECONDS = 60.0


#: What an alert says of one failure: the error text stays out, as it may quote a response.
ALERT_FIELDS = ("run_id", "schedule", "task", "attempts", "reason", "failed_at")


def alert_fields(record: FailedRecord) -> dict[str, Any]:
    """The fields of one failure in an alert's JSON."""
    summary = record.summary()
    return {name: summary[name] for name in ALERT_FIELDS}


def alert_line(record: FailedRecord) -> str:
    """One failure in one sentence, for people."""
    run, schedule, task, attempts, reason, failed_at = alert_fields(record).values()
    return (
        f"task {task or '?'} (schedule {schedule or '-'}, run {run or '?'}) "
        f"failed: {reason} after {attempts} attempt(s) at {failed_at or '?'}"
    )


@dataclass(frozen=True, slots=True)
class Condition:
    """A state the monitor watches (failed queue too deep, retry queue stalled) and its change."""

    key: str
    firing: bool
    detail: str

    def fields(self) -> dict[str, Any]:
        """The change as JSON."""
        status = "firing" if self.firing else "resolved"
        return {"name": self.key, "status": status, "detail": self.detail}


@dataclass
class Digest:
    """Everything the next alert will say; bounded in size however much happens."""

    failures: int = 0
    by_reason: Counter[str] = field(default_factory=Counter)
    by_schedule: Counter[str] = field(default_factory=Counter)
    samples: list[FailedRecord] = field(default_factory=list)
    conditions: dict[str, Condition] = field(default_factory=dict)
    started: float | None = None

    @property
    def empty(self) -> bool:
        """True when there is nothing to say."""
        return not self.failures and not self.conditions

    def add_failure(self, record: FailedRecord, now: float) -> None:
        """Count one failure; keep it as a sample while there is room."""
        self.started = now if self.started is None else self.started
        self.failures += 1
        self.by_reason[record.reason] += 1
        self.by_schedule[record.schedule or "-"] += 1
        if len(self.samples) < SAMPLES:
            self.samples.append(record)

    def add_condition(self, change: Condition, now: float) -> None:
        """Record a change; a firing and its recovery both unsent cancel out."""
        pending = self.conditions.get(change.key)
        if pending is not None and pending.firing and not change.firing:
            del self.conditions[change.key]
            return
        self.conditions[change.key] = change
        self.started = now if self.started is None else self.started

    def absorb(self, newer: Digest) -> None:
        """Add what happened after this digest (which could not be sent) to it."""
        for record in newer.samples:
            if len(self.samples) < SAMPLES:
                self.samples.append(record)
        self.failures += newer.failures
        self.by_reason.update(newer.by_reason)
        self.by_schedule.update(newer.by_schedule)
        for change in newer.conditions.values():
            self.add_condition(change, newer.started or 0.0)

    def text(self, namespace: str) -> str:
        """The human line(s) chat webhooks display."""
        lines = [
            f"[{namespace}] {'ALERT' if c.firing else 'RESOLVED'}: {c.detail}"
            for c in self.conditions.values()
        ]
        if self.failures == 1:
            lines.append(f"[{namespace}] {alert_line(self.samples[0])}")
        elif self.failures > 1:
            reasons = ", ".join(f"{k} {n}" for k, n in self.by_reason.most_common())
            schedules = ", ".join(f"{k} {n}" for k, n in self.by_schedule.most_common(5))
            lines.append(
                f"[{namespace}] {self.failures} tasks failed ({reasons}); schedules: {schedules}; "
                f"first: {alert_line(self.samples[0])}"
            )
        return "\n".join(lines)

    def body(self, namespace: str) -> dict[str, Any]:
        """The JSON posted to the webhook: the first failure's fields, counts and samples."""
        body: dict[str, Any] = alert_fields(self.samples[0]) if self.samples else {}
        body.update(
            namespace=namespace,
            text=self.text(namespace),
            count=self.failures,
            by_reason=dict(self.by_reason),
            by_schedule=dict(self.by_schedule),
            failures=[alert_fields(record) for record in self.samples],
            conditions=[change.fields() for change in self.conditions.values()],
        )
        return body


class AlertSender:
    """Posts digests to one target, at most one per minimum interval, retrying failures."""

    def __init__(
        self,
        settings: MonitorSettings,
        session: aiohttp.ClientSession,
        target: Target,
        *,
        retry_base_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.target = target
        self.pending = Digest()
        self.sent = 0
        self._session = session
        self._clock = clock
        self._retry_base = retry_base_seconds
        self._backoff = retry_base_seconds
        self._last_sent = float("-inf")
        self._wake = asyncio.Event()

    def failure(self, record: FailedRecord) -> None:
        """Queue a failure for the next alert; never waits."""
        self.pending.add_failure(record, self._clock())
        self._wake.set()

    def condition(self, change: Condition) -> None:
        """Queue a condition change for the next alert; never waits."""
        self.pending.add_condition(change, self._clock())
        self._wake.set()

    async def run(self) -> None:
        """Send pending digests until cancelled."""
        while True:
            if self.pending.empty:
                self._wake.clear()
                await self._wake.wait()
                continue
            delay = self._ready_at() - self._clock()
            if delay > 0:
                await asyncio.sleep(delay)
                continue
            await self._send_pending()

    def _ready_at(self) -> float:
        started = self.pending.started or self._clock()
        return max(
            started + self.settings.alert_group_wait_seconds,
            self._last_sent + self.settings.alert_min_interval_seconds,
        )

    async def _send_pending(self) -> None:
        digest, self.pending = self.pending, Digest()
        if await self._post(digest):
            self._last_sent = self._clock()
            self._backoff = self._retry_base
            return
        digest.absorb(self.pending)
        self.pending = digest
        await asyncio.sleep(self._backoff)
        self._backoff = min(self._backoff * 2, MAX_BACKOFF_SECONDS)

    async def _post(self, digest: Digest) -> bool:
        target = self.target
        where = {"target": target.kind, "url": target.safe, "failures": digest.failures}
        try:
            for request in target.requests(digest, self.settings.namespace):
                status = await self._send(request)
                if not 200 <= status < 300:
                    log.warning("alert refused by its target; retrying", status=status, **where)
                    return False
        except SecretUnavailable as error:
            # The error names the reference (env NAME, file path), never the value.
            log.error(  # noqa: TRY400 - a missing secret has no traceback worth showing
                "alert not sent: its secret cannot be read; retrying", error=str(error), **where
            )
            return False
        except (aiohttp.ClientError, TimeoutError) as error:
            log.warning("alert not delivered; retrying", error=type(error).__name__, **where)
            return False
        self.sent += 1
        ALERTS.labels(kind=target.kind).inc()
        return True

    async def _send(self, request: Request) -> int:
        # The answer is read and dropped: a hostile target may echo the secret back.
        async with self._session.post(
            request.url,
            data=request.body,
            headers=dict(request.headers),
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=self.settings.alert_timeout_seconds),
        ) as response:
            await response.read()
            return response.status

    async def flush(self) -> None:
        """On shutdown, try once to send what is pending; log what could not be sent."""
        if self.pending.empty:
            return
        digest = self.pending
        if not await self._post(digest):
            log.error(
                "alert lost at shutdown",
                target=self.target.kind,
                failures=digest.failures,
                conditions=list(digest.conditions),
            )
