"""One attempt, from a delivered message to its result: the body's checks, the run's cancel,
its rate windows and the flow control's admission, then the handler under its overlap lock
and concurrency slots.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from functools import partial
from typing import Any

from warren_cron.codec import decode_body
from warren_cron.envelope import Envelope
from warren_cron.errors import MessageDecodeError
from warren_cron.headers import H_REDELIVERED
from warren_cron.worker.attempt import Outcome, Result, run_attempt
from warren_cron.worker.cancels import Cancels, Scope
from warren_cron.worker.context import TaskContext
from warren_cron.worker.crashloop import Mark
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.flow import HTTP_TASK, Flow
from warren_cron.worker.gate import Gate
from warren_cron.worker.limits import body_too_large
from warren_cron.worker.longrun import LongRuns
from warren_cron.worker.metrics import WorkerMetrics
from warren_cron.worker.overlap import guarded, run_guarded
from warren_cron.worker.registry import Registry
from warren_cron.worker.report import Reporter
from warren_cron.worker.settings import WorkerSettings


class Pipeline:
    """What every attempt passes through; ``registry`` is set once the worker connected."""

    def __init__(
        self,
        settings: WorkerSettings,
        metrics: WorkerMetrics,
        report: Reporter,
        flow: Flow | None,
        cancels: Cancels,
    ) -> None:
        self.settings = settings
        self.registry = Registry()
        self.gate = Gate(settings)
        self._metrics, self._report = metrics, report
        self._flow, self._cancels = flow, cancels
        #: Long attempts (worker/longrun.py); the worker gives it its history and registry.
        self.long = LongRuns(settings)

    async def run(
        self, message: Delivery, attempt: int, mark: Mark
    ) -> tuple[Envelope | None, Result]:
        """The attempt of ``message``: its envelope (None if unreadable) and its result."""
        refused = body_too_large(message.body, self.settings.max_body_bytes) or mark.looping
        if refused is not None:
            return None, refused
        return await self._attempt(message, attempt)

    async def _attempt(self, message: Delivery, attempt: int) -> tuple[Envelope | None, Result]:
        try:
            envelope = decode_body(message.body)
        except MessageDecodeError as error:
            return None, Result(Outcome.TERMINAL, "decode-error", str(error))
        # An adopted copy of a redelivered message counts as redelivered on its first attempt.
        again = message.redelivered or (attempt == 1 and H_REDELIVERED in message.headers)
        timeout = self.settings.timeout_for(envelope.timeout_seconds)
        ctx = TaskContext.of(envelope, attempt, again, timeout)
        # A cancelled run is not started; a cancel that comes while it runs stops it.
        if not self._cancels.live:  # what was stored while it was away is read first
            await self._cancels.current()
        scope = self._cancels.scope(envelope)
        if scope.stopped is not None:
            return envelope, scope.result()
        return envelope, await self._scoped(scope, message, envelope, attempt, ctx)

    async def _scoped(
        self, scope: Scope, message: Delivery, envelope: Envelope, attempt: int, ctx: TaskContext
    ) -> Result:
        """The attempt in its cancel scope (``async with scope``, spelled out: no two
        coroutines an attempt to enter and leave it)."""
        scope.enter()
        try:
            result = await self._admitted(message, envelope, attempt, ctx)
        except BaseException as error:
            if scope.leave(isinstance(error, asyncio.CancelledError)):
                return scope.result()
            raise
        scope.leave(cancelled=False)
        if scope.stopped is not None:  # it ended on its own, with our cancel on its way
            await scope.absorb()
        return result

    async def _admitted(
        self, message: Delivery, envelope: Envelope, attempt: int, ctx: TaskContext
    ) -> Result:
        plain = self.gate.plain(envelope)
        if not plain and (waits := await self._windows(envelope)) is not None:
            return waits
        # Flow control watches http tasks alone: the others pay one comparison.
        flow = self._flow if envelope.task == HTTP_TASK else None
        if flow is not None and (deferred := flow.admit(envelope, attempt)) is not None:
            return deferred
        if self._metrics.enabled:
            self._metrics.started(envelope.scheduled_for, attempt)
        self._report.started(message, envelope, attempt)
        result = await self._run(message, envelope, ctx, plain)  # a coroutine, not a layer of one
        if flow is not None:
            flow.ended(envelope, result)
        return result

    async def _windows(self, envelope: Envelope) -> Result | None:
        """A deferral when the start does not fit a rate window of the attempt, else None."""
        rates = self.gate.rates(envelope)
        return await self.gate.admit(rates, envelope) if rates else None

    def _run(
        self, message: Delivery, envelope: Envelope, ctx: TaskContext, plain: bool
    ) -> Coroutine[Any, Any, Result]:
        """The handler, under its overlap lock (worker/overlap.py) and concurrency slots
        (worker/slots.py) when it has them; straight away when it has none (most)."""
        limit = self.settings.result_max_bytes
        long = self.long.wanted(envelope)
        if plain and not long and not guarded(envelope):
            return run_attempt(self.registry, envelope, ctx, limit)
        run = partial(run_attempt, self.registry, envelope, ctx, limit)
        limited = self.gate.limited(envelope, run)
        if long:
            guarded_run = partial(run_guarded, self.settings, envelope, ctx, limited)
            return self.long.run(message, envelope, ctx, guarded_run)
        return run_guarded(self.settings, envelope, ctx, limited)
