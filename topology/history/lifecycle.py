"""A run's state for an application: its run folded to one of eight states, with its attempts.

``pending`` (published, due, no attempt begun), ``delayed`` (due later), ``running`` (an
attempt began and has not ended), ``retrying`` (an attempt failed, the next waits in a retry
queue), then one of the ends: ``succeeded``, ``failed``, ``expired`` (its ``ttl`` or deadline
passed before it could succeed), ``cancelled`` (ended without running to its end by its
schedule's overlap policy: ``replaced``, ``lock-contended``, or ``skipped`` by the
scheduler; or by a cancel, ``topology/cancel/``; ``reason`` says which). A failed run can
still be replayed: its state then starts over.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from warren_cron.clock import utc_text
from warren_cron.history.events import Event
from warren_cron.history.outcomes import HANDED_OVER
from warren_cron.history.run_fold import RUNNING, Run, run_time

State = Literal[
    "pending", "delayed", "running", "retrying", "succeeded", "failed", "expired", "cancelled"
]
#: States after which nothing more happens to a run (unless a failed one is replayed).
FINAL: frozenset[str] = frozenset({"succeeded", "failed", "expired", "cancelled"})
#: Run outcomes (``topology/history/run_fold.py``) that are a cancel for an application.
_CANCELS = frozenset({"replaced", "lock-contended", "skipped", "cancelled"})
#: Events that end an attempt or the run (but a hand-over: ``ends``).
_ENDS = frozenset({"attempt", "failed", "skipped", "cancelled"})


@dataclass(slots=True)
class Attempt:
    """One attempt of a run: when it began and ended, where, and how it went."""

    number: int
    replay: int = 0
    started_at: datetime | None = None
    ended_at: datetime | None = None
    worker: str | None = None
    outcome: str | None = None
    reason: str | None = None
    http_status: int | None = None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The attempt as one JSON object."""
        return {
            "number": self.number,
            "replay": self.replay,
            "started_at": _text(self.started_at),
            "ended_at": _text(self.ended_at),
            "worker": self.worker,
            "outcome": self.outcome,
            "reason": self.reason,
            "http_status": self.http_status,
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class RunStatus:
    """Where one run stands, as ``RunHandle.status()`` and ``warren runs show`` give it."""

    run_id: str
    state: State
    schedule: str | None = None
    task: str | None = None
    due: datetime | None = None
    ended_at: datetime | None = None
    reason: str | None = None
    error: str | None = None
    #: The handler's return value (JSON) once the run succeeded.
    result: Any = None
    attempts: tuple[Attempt, ...] = field(default=())
    #: A long attempt's last progress (any JSON), when history last heard it beat, and its
    #: heartbeats then (``docs/long-jobs.md``).
    progress: Any = None
    last_heartbeat: datetime | None = None
    heartbeats: int = 0

    @property
    def done(self) -> bool:
        """True once the run ended (see ``FINAL``)."""
        return self.state in FINAL

    def as_json(self) -> dict[str, Any]:
        """The status as one JSON object (``--json``, the HTTP API)."""
        return {
            "run_id": self.run_id,
            "state": self.state,
            "schedule": self.schedule,
            "task": self.task,
            "due": _text(self.due),
            "ended_at": _text(self.ended_at),
            "reason": self.reason,
            "error": self.error,
            "result": self.result,
            "attempts": [attempt.as_json() for attempt in self.attempts],
            "progress": self.progress,
            "last_heartbeat": _text(self.last_heartbeat),
            "heartbeats": self.heartbeats,
        }


def status_of(
    run_id: str, run: Run | None, now: datetime, due: datetime | None = None
) -> RunStatus:
    """The status of ``run_id`` from its folded ``run`` (None: no event of it yet), at
    ``now``; ``due`` is when it was enqueued for, when the caller knows."""
    if run is None or not run.events:
        due = due or run_time(run_id)
        return RunStatus(run_id, _waiting(due, now), due=due)
    events = run.in_order()
    attempts = _attempts(events)
    last = _last_end(events)
    return RunStatus(
        run_id,
        _state(run, events, now, due),
        run.schedule,
        run.task,
        run.scheduled_for or due,
        run.ended_at,
        None if last is None else last.get("reason"),
        run.last_error,
        None if last is None or run.outcome != "succeeded" else last.get("result"),
        tuple(attempts),
        run.progress,
        run.last_heartbeat,
        run.heartbeats,
    )


def _waiting(due: datetime | None, now: datetime) -> State:
    return "delayed" if due is not None and due > now else "pending"


def _state(run: Run, events: list[Event], now: datetime, due: datetime | None) -> State:
    outcome = run.outcome
    if outcome in _CANCELS:
        return "cancelled"
    if outcome == "failed":
        last = _last_end(events)
        return "expired" if last is not None and last.get("reason") == "expired" else "failed"
    if outcome == "deferred":  # held back by flow control, tried again later
        return "delayed"
    if outcome not in (RUNNING, "retrying"):
        return "succeeded"
    if _live(events[-1]):
        return "running"
    return "retrying" if outcome == "retrying" else _waiting(run.scheduled_for or due, now)


def _live(event: Event) -> bool:
    """True for an event that leaves an attempt running: its start, its heartbeats, or a
    long attempt's hand-over to another worker."""
    if event.type in ("started", "progress"):
        return True
    return event.type == "attempt" and event.get("reason") in HANDED_OVER


def _last_end(events: list[Event]) -> Event | None:
    """The latest event that ended an attempt or the run."""
    found = [e for e in events if ends(e)]
    return found[-1] if found else None


def ends(event: Event) -> bool:
    """True for an event that ends an attempt or the run: not a long attempt's hand-over
    to another worker (``HANDED_OVER``), which the run outlives."""
    return event.type in _ENDS and event.get("reason") not in HANDED_OVER


def _attempts(events: list[Event]) -> list[Attempt]:
    """Every attempt the events tell of, from its ``started`` and ``attempt`` events."""
    found: dict[tuple[int, int], Attempt] = {}
    for event in events:
        if event.type not in ("started", "attempt"):
            continue
        number, replay = int(event.get("attempt", 0)), int(event.get("replay", 0))
        attempt = found.setdefault((replay, number), Attempt(number, replay))
        if event.type == "started":
            # A long attempt handed over starts again elsewhere: where it runs now.
            attempt.started_at = attempt.started_at or event.at
            attempt.worker = _worker(event) or attempt.worker
        elif event.get("reason") not in HANDED_OVER:
            attempt.worker = attempt.worker or _worker(event)
            _ended(attempt, event)
    return list(found.values())


def _ended(attempt: Attempt, event: Event) -> None:
    attempt.ended_at, attempt.outcome = event.at, event.get("outcome")
    if attempt.started_at is None:
        # A quick attempt's end says when it began, in place of a ``started`` event.
        attempt.started_at = event.time("started")
    attempt.reason, attempt.error = event.get("reason"), event.get("error")
    attempt.http_status = event.get("http_status")


def _worker(event: Event) -> str | None:
    host, pid = event.get("host"), event.get("pid")
    return None if host is None else f"{host}:{pid}"


def _text(moment: datetime | None) -> str | None:
    return None if moment is None else utc_text(moment)
