"""Run a task as a worker would, in process and without a broker, on a virtual clock.

Each attempt goes through the worker's own code: the registered handler (its payload
checked when typed), ``worker.attempt.run_attempt`` for the outcome and ``worker.fate.decide``
for what the broker would be told. A retry waits its plan's delay on a virtual clock, so a
six-step plan over hours runs at once; the task's deadline is judged on that clock too.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Unpack

import orjson
from structlog.testing import capture_logs

from warren_cron.client.options import EnqueueOptions, one_off, plan_of
from warren_cron.clock import utcnow
from warren_cron.envelope import Envelope
from warren_cron.plan import RetryPlan
from warren_cron.worker.attempt import Outcome, Result, run_attempt
from warren_cron.worker.context import TaskContext
from warren_cron.worker.fate import Action, Verdict, decide
from warren_cron.worker.handlers import LazyHttp, builtin_registry
from warren_cron.worker.handles import TaskHandle
from warren_cron.worker.registry import Registry
from warren_cron.worker.settings import WorkerSettings

CANCELLED = Result(Outcome.CANCELLED, "cancelled", "its run was cancelled")


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt: when it ran on the virtual clock, how it went, what the worker did."""

    number: int
    at: datetime
    #: ``succeeded``, ``retryable``, ``terminal`` or ``cancelled``.
    outcome: str
    #: What the worker did with the message: ``succeeded``, ``retrying``, ``failed``, ``cancelled``.
    action: str
    reason: str
    error: str | None
    #: What the handler logged, one dict per line (``structlog.testing.capture_logs``).
    logs: list[MutableMapping[str, Any]]
    #: What the handler returned, as JSON data (as ``result()`` reads it), if it succeeded.
    value: Any = None


@dataclass(frozen=True, slots=True)
class TaskRun:
    """A run to its end: ``state`` is ``succeeded``, ``failed`` or ``cancelled``; ``reason``
    says why it failed (``permanent-error``, ``invalid-payload``, ``retries-exhausted``,
    ``expired``, ``unknown-task``...)."""

    run_id: str
    task: str
    state: str
    reason: str
    error: str | None
    result: Any
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def logs(self) -> list[MutableMapping[str, Any]]:
        """Every attempt's log lines, in order."""
        return [line for attempt in self.attempts for line in attempt.logs]

    @property
    def delays(self) -> list[float]:
        """Seconds between one attempt and the next, on the virtual clock."""
        times = [attempt.at for attempt in self.attempts]
        return [(b - a).total_seconds() for a, b in itertools.pairwise(times)]


class Kit:
    """The worker's registry (``http``, ``noop`` and every ``@task``) without a broker.

    ``async with Kit() as kit: run = await kit.run(send_report, Report(customer=42))``.
    """

    def __init__(self, settings: WorkerSettings | None = None, registry: Registry | None = None):
        self.settings = settings or WorkerSettings()
        self._http = LazyHttp(self.settings)
        self.registry = builtin_registry(self._http) if registry is None else registry

    async def __aenter__(self) -> Kit:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the http task's connection pool, if it made one."""
        await self._http.aclose()

    async def run(
        self,
        task: TaskHandle[Any, Any] | str,
        payload: Any = None,
        *,
        cancel_at: int | None = None,
        **options: Unpack[EnqueueOptions],
    ) -> TaskRun:
        """Run ``task`` to its end as a worker would, every retry on the virtual clock.

        ``options`` are ``enqueue``'s (``plan``, ``ttl``, ``deadline``, ``timeout``, ``key``,
        ``delay``, ``at``); a handle's payload is checked as its ``enqueue`` does.
        ``cancel_at``: the run is cancelled before that attempt (1: before it ever runs).
        """
        envelope, key = self.envelope(task, payload, options)
        return await self.run_envelope(envelope, key, cancel_at)

    async def run_envelope(
        self, envelope: Envelope, key: str, cancel_at: int | None = None
    ) -> TaskRun:
        """Run a task's envelope to its end, starting on the plan named by ``key``."""
        attempts: list[Attempt] = []
        now = envelope.scheduled_for
        while True:
            number = len(attempts) + 1
            cancelled = cancel_at is not None and number >= cancel_at
            attempt, verdict = await self.attempt(envelope, key, number, now, cancelled)
            attempts.append(attempt)
            if verdict.action is not Action.RETRY:
                return self.ended(envelope, verdict, attempts)
            wait_ms = RetryPlan.from_key(key).delays_ms[0]
            now += timedelta(milliseconds=wait_ms if verdict.hold is None else verdict.hold * 1000)
            key = RetryPlan.from_key(key).rest().key

    def envelope(
        self, task: TaskHandle[Any, Any] | str, payload: Any, options: EnqueueOptions
    ) -> tuple[Envelope, str]:
        """The envelope an enqueue would send, and its plan's routing key."""
        if isinstance(task, TaskHandle):
            name, payload = task.name, task.payload_of(payload)
        else:
            name = task
        plan = plan_of(options, self.settings.default_plan())
        # Through JSON, as the broker carries it: a handler sees what a worker would.
        wire = orjson.loads(orjson.dumps(payload))
        return one_off(name, wire, options, utcnow()), plan.key

    async def attempt(
        self, envelope: Envelope, key: str, number: int, at: datetime, cancelled: bool = False
    ) -> tuple[Attempt, Verdict]:
        """One attempt at virtual time ``at``, with the message's remaining plan ``key``."""
        # The worker judges the deadline against now: shift it by the virtual clock's lead.
        lead = at - utcnow()
        deadline = None if envelope.deadline is None else envelope.deadline - lead
        shifted = envelope.model_copy(update={"deadline": deadline})
        ctx = self.context(envelope, number)
        with capture_logs() as logs:
            result = CANCELLED if cancelled else await self.attempt_result(shifted, ctx)
        verdict = decide(result, key, deadline, self.settings.retry_max_delay_ms)
        value = None if result.value is None else orjson.loads(orjson.dumps(result.value))
        line = Attempt(
            number, at, result.outcome.value, verdict.action.value, verdict.reason,
            verdict.error, logs, value,
        )  # fmt: skip
        return line, verdict

    async def attempt_result(self, envelope: Envelope, ctx: TaskContext) -> Result:
        """Run the handler once through the worker's ``run_attempt``."""
        limit = self.settings.result_max_bytes
        try:
            return await run_attempt(self.registry, envelope, ctx, limit)
        except asyncio.CancelledError:
            # The worker stops a cancelled run's attempt so; here the handler cancelled itself.
            return CANCELLED

    def context(self, envelope: Envelope, number: int) -> TaskContext:
        """The ``TaskContext`` a worker would give attempt ``number``."""
        timeout = self.settings.timeout_for(envelope.timeout_seconds)
        return TaskContext.of(envelope, number, False, timeout)

    @staticmethod
    def ended(envelope: Envelope, verdict: Verdict, attempts: list[Attempt]) -> TaskRun:
        """The run as it ended, with the handler's return value when it succeeded."""
        state = {Action.ACK: "succeeded", Action.CANCELLED: "cancelled"}.get(
            verdict.action, "failed"
        )
        return TaskRun(
            envelope.run_id, envelope.task, state, verdict.reason, verdict.error,
            attempts[-1].value, attempts,
        )  # fmt: skip


async def run_task(
    task: TaskHandle[Any, Any] | str,
    payload: Any = None,
    *,
    cancel_at: int | None = None,
    **options: Unpack[EnqueueOptions],
) -> TaskRun:
    """Run ``task`` to its end as a worker would, in process (``Kit.run``)."""
    async with Kit() as kit:
        return await kit.run(task, payload, cancel_at=cancel_at, **options)
