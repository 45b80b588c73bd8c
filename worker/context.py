"""What a handler knows about the attempt it is running."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import structlog

from warren_cron.worker.heartbeat import Beats

if TYPE_CHECKING:
    from warren_cron.envelope import Envelope

_log = structlog.get_logger("task")


class TaskContext:
    """The attempt being run: identity of the fire, attempt number, and a bound logger."""

    #: The attempt's heartbeats: set by a long attempt, else by the first ``heartbeat``; unset
    #: until then (a context is built on every attempt: it assigns nothing it may not need).
    beats: Beats

    __slots__ = (
        "_log",
        "attempt",
        "beats",
        "redelivered",
        "run_id",
        "schedule",
        "scheduled_for",
        "task",
        "timeout_seconds",
    )

    def __init__(
        self,
        *,
        run_id: str,
        task: str,
        schedule: str | None,
        scheduled_for: datetime,
        attempt: int,
        redelivered: bool,
        timeout_seconds: float,
    ) -> None:
        self.run_id = run_id
        self.task = task
        self.schedule = schedule
        self.scheduled_for = scheduled_for
        self.attempt = attempt
        self.redelivered = redelivered
        self.timeout_seconds = timeout_seconds
        self._log: structlog.typing.FilteringBoundLogger | None = None

    @classmethod
    def of(
        cls, envelope: Envelope, attempt: int, redelivered: bool, timeout_seconds: float
    ) -> TaskContext:
        """The context of attempt ``attempt`` of ``envelope``'s run, as a worker gives it."""
        return cls(
            run_id=envelope.run_id,
            task=envelope.task,
            schedule=envelope.schedule,
            scheduled_for=envelope.scheduled_for,
            attempt=attempt,
            redelivered=redelivered,
            timeout_seconds=timeout_seconds,
        )

    def heartbeat(self, progress: object = None) -> None:
        """Say the attempt is alive, with how far it got (small JSON, e.g. ``{"done": 120,
        "of": 900}``); no I/O: call it as often as you like."""
        try:
            beats = self.beats
        except AttributeError:  # not set on every attempt: most never heartbeat
            beats = self.beats = Beats()
        beats.beat(progress)

    @property
    def log(self) -> structlog.typing.FilteringBoundLogger:
        """A logger bound to run id, task and attempt (made on first use: most never log)."""
        if self._log is None:
            self._log = _log.bind(run_id=self.run_id, task=self.task, attempt=self.attempt)
        return self._log

    def __repr__(self) -> str:
        return f"TaskContext(run_id={self.run_id!r}, task={self.task!r}, attempt={self.attempt})"
