"""Report the end of each attempt: one log line, the metrics, and an ``attempt`` event in the
run history (with a ``failed`` event when the task went to the failed queue)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson
import structlog

import warren_cron.tracing as tracing
from warren_cron.codec import run_id_of
from warren_cron.envelope import Envelope
from warren_cron.headers import H_REPLAYS, H_SCHEDULE, number
from warren_cron.history.events import event, excerpt
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.fate import Action, Verdict
from warren_cron.worker.metrics import WorkerMetrics

log = structlog.get_logger("worker")
_LEVELS = {
    Action.ACK: "info",
    Action.RETRY: "warning",
    Action.FAIL: "error",
    Action.CONTENDED: "info",
    Action.REPLACED: "warning",
    Action.DEFER: "info",
    Action.CANCELLED: "warning",
}


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs a worker 1 µs a task
class Ended:
    """How one attempt ended, as the worker saw it."""

    message: Delivery
    envelope: Envelope | None
    attempt: int
    verdict: Verdict
    #: The attempt's own time, from delivery to the handler's end (its fate is settled later).
    seconds: float
    at: datetime
    #: The task went to the failed queue (its record confirmed, or dead-lettered as ``final``).
    failed: bool = False
    http_status: int | None = None
    #: The handler's return value, as JSON already encoded.
    result: orjson.Fragment | None = None


class Reporter:
    """Writes what each attempt did where operators look: logs, metrics, history."""

    def __init__(self, metrics: WorkerMetrics, history: HistoryPublisher | None) -> None:
        self._metrics = metrics
        self._history = history
        self._where: dict[str, Any] = {"host": socket.gethostname(), "pid": os.getpid()}

    def started(self, message: Delivery, envelope: Envelope, attempt: int) -> None:
        """Report that an attempt began: its run shows ``running`` until it ends."""
        if self._history is None:
            return
        ids: dict[str, Any] = {
            "run_id": envelope.run_id,
            "schedule": envelope.schedule,
            "task": envelope.task,
        }
        replay = number(message.headers.get(H_REPLAYS)) or None
        trace = tracing.trace_id()
        self._history.emit(
            event("started", **ids, replay=replay, attempt=attempt, trace_id=trace, **self._where)
        )

    def ended(self, end: Ended) -> None:
        """Report one attempt's end."""
        verdict, ids = end.verdict, _ids(end)
        self._metrics.attempt(ids["task"] or "-", verdict.action.value, verdict.reason, end.seconds)
        if verdict.key is not None and verdict.action is Action.DEFER:
            self._metrics.deferred(verdict.reason, verdict.key)
        duration_ms = round(end.seconds * 1000, 2)
        getattr(log, _LEVELS[verdict.action])(
            "attempt",
            **ids,
            attempt=end.attempt,
            outcome=verdict.action.value,
            reason=verdict.reason,
            duration_ms=duration_ms,
            error=verdict.error,
        )
        if self._history is not None:
            self._to_history(self._history, end, ids, duration_ms)

    def _to_history(
        self, history: HistoryPublisher, end: Ended, ids: dict[str, Any], ms: float
    ) -> None:
        verdict, error = end.verdict, excerpt(end.verdict.error)
        # Which replay the attempt belongs to: its events may reach the stream before the
        # replay's own (topology/history/run_fold.py).
        replay = number(end.message.headers.get(H_REPLAYS)) or None
        trace_id = tracing.trace_id()
        history.emit(
            event(
                "attempt",
                at=end.at,
                **ids,
                replay=replay,
                attempt=end.attempt,
                outcome=verdict.action.value,
                reason=verdict.reason,
                duration_ms=ms,
                error=error,
                http_status=end.http_status,
                result=end.result,
                trace_id=trace_id,
                key=verdict.key,
                **self._where,
            )
        )
        if end.failed:
            history.emit(
                event(
                    "failed",
                    at=end.at,
                    **ids,
                    replay=replay,
                    reason=verdict.reason,
                    attempts=end.attempt,
                    error=error,
                    trace_id=trace_id,
                    key=verdict.key,
                )
            )


def _ids(end: Ended) -> dict[str, Any]:
    """Run id, schedule and task; from the headers when the body was no envelope."""
    if end.envelope is not None:
        envelope = end.envelope
        return {"run_id": envelope.run_id, "schedule": envelope.schedule, "task": envelope.task}
    schedule = end.message.headers.get(H_SCHEDULE)
    return {
        "run_id": run_id_of(None, end.message.message_id, end.message.headers),
        "schedule": schedule if isinstance(schedule, str) else None,
        "task": None,
    }
