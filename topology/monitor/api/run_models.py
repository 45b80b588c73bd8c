"""The bodies, queries and answers of ``/api/v1/runs`` and ``/api/v1/failed``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from warren_cron.envelope import TaskName
from warren_cron.history.lifecycle import State
from warren_cron.monitor.api.models import Reason, Strict
from warren_cron.monitor.console.run_waiters import MAX_WAIT_SECONDS

#: Runs or records one page holds at most.
PAGE = 100
Pattern = Field(None, min_length=1, max_length=200, description="a name pattern: * and ?")
Since = Field(None, min_length=1, max_length=40, description="an age (30m, 2h, 7d) or an ISO time")


class RunsQuery(Strict):
    """Which runs to list: the newest first."""

    schedule: str | None = Pattern
    state: State | None = None
    since: str | None = Field(None, min_length=1, max_length=40, description="default 1d")
    limit: int = Field(50, ge=1, le=PAGE)


class RunQuery(Strict):
    """How long to wait for the run to end before answering."""

    wait: float = Field(
        0,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="seconds to wait for the run to end (a long poll); 0: answer at once",
    )


class Attempt(BaseModel):
    """One attempt of a run."""

    number: int
    replay: int
    started_at: str | None
    ended_at: str | None
    worker: str | None = Field(description="host:pid")
    outcome: str | None = Field(description="null while it runs")
    reason: str | None
    http_status: int | None
    error: str | None


class Run(BaseModel):
    """Where one run stands, as ``RunHandle.status()`` gives it."""

    run_id: str
    state: State
    schedule: str | None
    task: str | None
    due: str | None
    ended_at: str | None
    reason: str | None
    error: str | None
    result: Any = Field(description="the handler's return value once it succeeded")
    attempts: list[Attempt]
    progress: Any = Field(None, description="a long attempt's last progress (any JSON)")
    last_heartbeat: str | None = Field(None, description="when history last heard it beat")
    heartbeats: int = Field(0, description="its heartbeats counted by then")


class Scanned(BaseModel):
    """How much of the history stream an answer read (0: answered from memory)."""

    scanned: int = Field(0, description="history events read from the stream for this answer")
    truncated: bool = Field(
        False, description="the read stopped at CRON_HISTORY_SCAN_EVENTS: the answer is partial"
    )
    hint: str | None = Field(None, description="with truncated: how to narrow the query")


class RunRead(Run, Scanned):
    """One run, with how much of the history was read for it."""


class RunList(Scanned):
    """The newest runs the query picks, with events since ``since``."""

    runs: list[Run]
    since: str
    more: bool = Field(description="the page is full: older runs may match")


class EnqueueBody(Strict):
    """Enqueue one task, now, ``at`` a time or after a ``delay``."""

    task: TaskName
    payload: Any = None
    delay: float | None = Field(None, ge=0, description="seconds")
    at: datetime | None = None
    ttl: float | None = Field(None, gt=0, description="seconds it may wait before it expires")
    key: str | None = Field(None, description="idempotency key: the same key, the same run")
    reason: Reason | None = None
    force: bool = Field(
        False,
        description="send it even when no live worker registered the task (one may come later)",
    )


class Enqueued(BaseModel):
    """What the enqueue did."""

    run_id: str
    due: str | None
    created: bool = Field(description="false: an earlier enqueue used this key; nothing sent")


class RecordQuery(Strict):
    """Which failed records: every filter that is set must match."""

    schedule: str | None = Pattern
    reason: str | None = Field(None, min_length=1, max_length=100)
    since: str | None = Since
    text: str | None = Field(None, min_length=1, max_length=200)
    run_id: str | None = Field(None, min_length=1, max_length=300, description="exact")


class FailedQuery(RecordQuery):
    """A page of failed records."""

    limit: int = Field(50, ge=1, le=PAGE)


class FailedRecord(BaseModel):
    """One failed record, as ``warren failed list --json`` shows it."""

    run_id: str | None
    schedule: str | None
    task: str | None
    attempts: int
    reason: str
    failed_at: str | None
    replays: int
    error: str | None


class FailedList(BaseModel):
    """The records the filters pick, oldest first, as of ``read_at``."""

    records: list[FailedRecord]
    matched: int
    read_at: str | None


class MoveBody(Strict):
    """Replay or purge the records a filter picks; at least one filter, or ``all``."""

    filter: RecordQuery = Field(default_factory=RecordQuery)
    all: bool = Field(False, description="take every record when no filter is set")
    dry_run: bool = Field(False, description="count what would move; move nothing")
    limit: int | None = Field(None, ge=1, description="move at most this many")
    reason: Reason | None = None


class Moved(BaseModel):
    """What a replay or purge did (or, with ``dry_run``, would do)."""

    dry_run: bool
    matched: int
    moved: int
    failed: int = Field(description="records that could not be moved and stay")
    resent: int = Field(
        0,
        description="records sent again after the broker went away before confirming them:"
        " each may run twice",
    )
    message: str


class CancelBody(Strict):
    """Why the run is cancelled (optional, kept in the history with the token's name)."""

    reason: str | None = Field(None, min_length=1, max_length=500, description="why")


class Cancelled(BaseModel):
    """What the cancel did."""

    run_id: str
    state: str = Field(description="the run's state when the cancel was asked for")
    cancelled: bool
    message: str
