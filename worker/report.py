"""Report the end of each attempt: one log line, the metrics, and an ``attempt`` event in the
run history (with a ``failed`` event when the task went to the failed queue).

An attempt's ``started`` event says its run is ``running``; it is written only for an attempt
still running when the history's next batch goes out (``LINGER_SECONDS``, a tenth of a second):
most attempts end before that, and their ``attempt`` event then says when they began
(``started``). A worker that dies mid-attempt has written it by then.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

import orjson
import structlog

import warren_cron.tracing as tracing
from warren_cron.clock import now_text
from warren_cron.codec import run_id_of
from warren_cron.envelope import Envelope
from warren_cron.headers import H_REPLAYS, H_SCHEDULE, number
from warren_cron.history.events import SCHEMA, event, excerpt
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.runtime.logs import DictLines
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.fate import Action, Verdict
from warren_cron.worker.metrics import WorkerMetrics

log = structlog.get_logger("worker")
#: The level of each outcome's line, by the outcome's text (an enum member hashes in Python).
_LEVELS = {
    Action.ACK.value: "info",
    Action.RETRY.value: "warning",
    Action.FAIL.value: "error",
    Action.CONTENDED.value: "info",
    Action.REPLACED.value: "warning",
    Action.DEFER.value: "info",
    Action.CANCELLED.value: "warning",
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
    #: When it ended, as history spells a time (``now_text``).
    at: str
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
        self._where = where()
        #: The line writer, bound at the first attempt's end (after logging is configured),
        #: as structlog's lazy logger would, without a look-up through it each line.
        self._lines: DictLines | None = None
        #: Attempts begun whose ``started`` event is not written yet: when, and what.
        self._starting: dict[Delivery, tuple[str, Envelope, int, str | None]] = {}
        if history is not None:
            history.before_batch = self.write_started

    def started(self, message: Delivery, envelope: Envelope, attempt: int) -> None:
        """Note that an attempt began: its run shows ``running`` from the next batch on."""
        if self._history is None:
            return
        if not self._starting:
            # The first since the last batch: the publisher wakes for the next one (while
            # any wait, it has been told already: the batch that empties them also clears it).
            self._history.expect()
        self._starting[message] = (now_text(), envelope, attempt, tracing.trace_id())

    def write_started(self) -> None:
        """Write the ``started`` event of every attempt begun and not ended since the last
        batch (the publisher calls this before each batch)."""
        starting, self._starting = self._starting, {}
        assert self._history is not None
        for message, (at, envelope, attempt, trace) in starting.items():
            ids = {"run_id": envelope.run_id, "schedule": envelope.schedule, "task": envelope.task}
            replay = _replay(message)
            fields = {"replay": replay, "attempt": attempt, "trace_id": trace, **self._where}
            self._history.emit(event("started", at=at, **ids, **fields))

    def ended(self, end: Ended) -> None:
        """Report one attempt's end."""
        verdict, ids = end.verdict, _ids(end)
        outcome = verdict.action.value
        if self._metrics.enabled:
            self._metrics.attempt(ids["task"] or "-", outcome, verdict.reason, end.seconds)
            if verdict.key is not None and verdict.action is Action.DEFER:
                self._metrics.deferred(verdict.reason, verdict.key)
        duration_ms = round(end.seconds * 1000, 2)
        line = {**ids, "attempt": end.attempt, "outcome": outcome, "reason": verdict.reason}
        # Stamped with the time its attempt ended, as its history event is.
        line.update(duration_ms=duration_ms, error=verdict.error, timestamp=end.at)
        (self._lines or self._bound()).write(_LEVELS[outcome], "attempt", line)
        if self._history is not None:
            self._to_history(self._history, end, ids, outcome, duration_ms)

    def _bound(self) -> DictLines:
        self._lines = DictLines(log.bind())
        return self._lines

    def _to_history(
        self, history: HistoryPublisher, end: Ended, ids: dict[str, Any], outcome: str, ms: float
    ) -> None:
        data = self._attempt_event(end, ids, outcome, ms)
        # Its ``started`` event, not written yet, is no longer needed: this one tells it.
        if (began := self._starting.pop(end.message, None)) is not None:
            data["started"] = began[0]
        history.emit(data)
        if end.failed:
            verdict, error = end.verdict, excerpt(end.verdict.error)
            history.emit(
                event(
                    "failed",
                    at=end.at,
                    **ids,
                    replay=_replay(end.message),
                    reason=verdict.reason,
                    attempts=end.attempt,
                    error=error,
                    trace_id=tracing.trace_id(),
                    key=verdict.key,
                )
            )

    def _attempt_event(
        self, end: Ended, ids: dict[str, Any], outcome: str, ms: float
    ) -> dict[str, Any]:
        """The ``attempt`` event (``history.events.event``'s form, built inline: a worker
        writes thousands a second, and most of its optional fields are None)."""
        verdict = end.verdict
        data = {"v": SCHEMA, "type": "attempt", "at": end.at, **ids, "attempt": end.attempt}
        data.update(outcome=outcome, reason=verdict.reason, duration_ms=ms)
        data.update(self._where)
        for key in ("run_id", "schedule", "task"):
            if ids[key] is None:
                del data[key]
        # Which replay the attempt belongs to: its events may reach the stream before the
        # replay's own (topology/history/run_fold.py).
        if (replay := _replay(end.message)) is not None:
            data["replay"] = replay
        if verdict.error is not None:
            data["error"] = excerpt(verdict.error)
        for key, value in (("http_status", end.http_status), ("result", end.result)):
            if value is not None:
                data[key] = value
        if (trace := tracing.trace_id()) is not None:
            data["trace_id"] = trace
        if verdict.key is not None:
            data["key"] = verdict.key
        return data


def where() -> dict[str, Any]:
    """Where an attempt's events come from: this host and process."""
    return {"host": socket.gethostname(), "pid": os.getpid()}


def _replay(message: Delivery) -> int | None:
    """The number of the replay a message belongs to; None before any replay."""
    replays = message.headers.get(H_REPLAYS)
    return None if replays is None else number(replays) or None


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
