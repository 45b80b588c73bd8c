"""Long attempts: claimed by an exclusive queue, parked in a lease queue, their delivery acked
at once, so that they may run for hours under the broker's ``consumer_timeout``; handed to
another worker when theirs dies (docs/long-jobs.md).

The entry point is ``LongRuns``: ``wanted`` says whether an attempt is long (a comparison of
numbers the attempt holds, nothing else, so short tasks pay nothing), ``run`` runs a long one,
and ``settling`` gives the consumer what to settle its fate on instead of the acked delivery.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import structlog
from aio_pika.abc import AbstractConnection

from warren_cron.broker.exclusive import plain_connection, try_exclusive
from warren_cron.envelope import Envelope
from warren_cron.errors import BROKER_TROUBLE
from warren_cron.history.outcomes import CLAIM_LOST, CLAIMED
from warren_cron.names import Names
from warren_cron.worker.attempt import Outcome, Result
from warren_cron.worker.context import TaskContext
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.heartbeat import UNDECLARED_SUMMARY_SECONDS, Beats, Emit, silence, summarize
from warren_cron.worker.lease_keeper import Keeper
from warren_cron.worker.overlap import _run_until_stopped as run_until_stopped
from warren_cron.worker.parked import Parked
from warren_cron.worker.parking import (
    H_LEASE,
    H_LONG_ATTEMPT,
    LeaseQueue,
    claim_queue,
    handovers,
    lease_of,
    parked_count,
)
from warren_cron.worker.registry import Registry
from warren_cron.worker.report import where
from warren_cron.worker.settings import WorkerSettings

log = structlog.get_logger("worker")
Attempt = Callable[[], Coroutine[Any, Any, Result]]
#: The reason of an attempt stopped because a handler stopped heartbeating.
HUNG = "hung"


@dataclass(frozen=True, slots=True)
class Job:
    """One long attempt: what was delivered, what it runs, and how often it heartbeats."""

    message: Delivery
    envelope: Envelope
    ctx: TaskContext
    attempt: Attempt
    heartbeat: float | None


def attempt_of(headers: dict[str, Any], counted: int) -> int:
    """The attempt number of a long attempt: a handed-over copy runs its attempt again; a
    retry a long attempt sent counts on from it (``counted`` is what ``x-death`` says)."""
    sent = headers.get(H_LONG_ATTEMPT)
    if not isinstance(sent, int):
        return counted
    return sent if H_LEASE in headers else sent + counted


class LongRuns:
    """The long attempts of one worker."""

    def __init__(self, settings: WorkerSettings, emit: Emit | None = None) -> None:
        self._settings = settings
        self._names = Names(settings.namespace)
        self._emit = emit
        self._crash_limit = settings.crash_loop_limit
        self._lease = settings.long_lease_seconds
        #: Long attempts running now: their deliveries are acked, so the prefetch no longer
        #: bounds them; at ``CRON_PREFETCH`` of them a worker takes no more.
        self.running = 0
        #: Above this timeout an attempt is long: its delivery could not stay unacked.
        self.above = settings.consumer_timeout_seconds * 0.9
        #: Heartbeat intervals of the tasks whose handlers declared one (``use``).
        self.beating: dict[str, float] = {}
        #: Long attempts that ended, by the delivery they came in: the consumer settles them.
        self.parked: dict[Delivery, Parked] = {}

    def use(self, registry: Registry) -> None:
        """Know which registered handlers heartbeat, and how often."""
        found = ((name, registry.get(name)) for name in registry.names())
        self.beating = {n: r.heartbeat_seconds for n, r in found if r and r.heartbeat_seconds}

    def wanted(self, envelope: Envelope) -> bool:
        """True when the attempt is long: its timeout is above the consumer timeout's bound,
        or its handler declared a heartbeat interval (no lookup unless one did)."""
        asked = envelope.timeout_seconds
        if asked is not None and asked > self.above:
            return True
        return bool(self.beating) and envelope.task in self.beating

    def settling(self, message: Delivery, attempt: int) -> tuple[Delivery, int]:
        """What to settle ``message``'s fate on, and its attempt number (itself, unchanged,
        unless it ran long)."""
        parked = self.parked.pop(message, None)
        return (message, attempt) if parked is None else (parked, parked.attempt)

    async def run(
        self,
        message: Delivery,
        envelope: Envelope,
        ctx: TaskContext,
        attempt: Attempt,
    ) -> Result:
        """Claim the run, park it, ack its delivery and run ``attempt`` while the lease is kept;
        ``settling`` then gives the consumer the parked delivery."""
        if self.running >= self._settings.prefetch:
            return self._full()
        ctx.attempt = attempt_of(message.headers, ctx.attempt)
        job = Job(message, envelope, ctx, attempt, self.beating.get(envelope.task))
        self.running += 1
        try:
            return await self._connected(job)
        finally:
            self.running -= 1

    def _full(self) -> Result:
        """This worker runs as many long attempts as its prefetch: the run waits a lease in
        the delay levels, no attempt spent, for this worker or another."""
        why = f"this worker runs {self.running} long attempts already (CRON_PREFETCH)"
        return Result(Outcome.DEFERRED, "long-attempts-full", why, retry_after=self._lease)

    async def _connected(self, job: Job) -> Result:
        settings = self._settings
        name = f"warren-long {job.envelope.run_id}"
        try:
            connection = await plain_connection(settings, name, settings.heartbeat_seconds)
        except BROKER_TROUBLE as error:
            return Result(Outcome.RETRYABLE, "claim-unavailable", f"cannot claim: {error!r}")
        try:
            return await self._claimed(connection, job)
        finally:
            if job.message not in self.parked:  # not parked: nothing to keep the claim for
                await connection.close()

    async def _claimed(self, connection: AbstractConnection, job: Job) -> Result:
        message, envelope = job.message, job.envelope
        claim = claim_queue(self._names, envelope.run_id)
        if await try_exclusive(connection, claim) is None:
            return self._claim_held(message)
        name = lease_of(self._names, envelope, message.routing_key)
        parked = await parked_count(connection, name)
        if parked and H_LEASE not in message.headers:
            # Another run of this Forbid schedule is parked: running long, or handed over.
            why = f"a run of {envelope.schedule!r} is running long ({envelope.concurrency})"
            return Result(Outcome.CONTENDED, "lock-contended", why)
        if H_LEASE in message.headers and handovers(message.headers) >= self._crash_limit:
            return _crash_loop(handovers(message.headers))
        channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        attempt = job.ctx.attempt
        lease = LeaseQueue(channel, message, attempt, name, self._settings)
        await lease.park(stale=parked == 0)
        await message.ack()  # the broker holds the run in the lease queue from now on
        self.parked[message] = done = Parked(message, attempt, lease, connection, self._names.dlx)
        keeper = Keeper(connection, channel, lease, claim, self._settings.long_lease_seconds)
        return await self._run(done, keeper, job)

    async def _run(self, parked: Parked, keeper: Keeper, job: Job) -> Result:
        lease = self._settings.long_lease_seconds
        if H_LEASE in job.message.headers:
            # Handed over: whoever ran it before stops within half a lease of losing touch.
            await asyncio.sleep(lease / 2)
        ctx = job.ctx
        ctx.timeout_seconds = job.envelope.timeout_seconds or self._settings.task_timeout_seconds
        ctx.beats = Beats()
        watchers = self._watchers(job, keeper.stop)
        keeper.start()
        try:
            result = await run_until_stopped(job.attempt, keeper.stop, ctx)
        finally:
            await keeper.end()
            for watcher in watchers:
                watcher.cancel()
            # Settled by the consumer at once; if it never is (a shutdown), the claim goes
            # after a lease and the parked copy hands the run over.
            parked.let_go_in(lease)
        parked.lost = result.reason == CLAIM_LOST
        log.info("long attempt ended", run_id=job.envelope.run_id, reason=result.reason)
        return result

    def _claim_held(self, message: Delivery) -> Result:
        """What a delivery of a run whose claim another attempt holds comes to: a parked copy
        is dropped (the holder keeps one of its own); anything else (a retry quicker than
        the end of the attempt that sent it, a second publish) waits half a lease, unspent."""
        why = "another attempt of this run holds its claim and runs it"
        if H_LEASE in message.headers:
            return Result(Outcome.CONTENDED, CLAIMED, why)
        wait = self._settings.long_lease_seconds / 2
        return Result(Outcome.DEFERRED, CLAIMED, why, retry_after=wait)

    def _watchers(self, job: Job, stop: asyncio.Future[Result]) -> list[asyncio.Task[None]]:
        """The watchdog (when the handler declared a heartbeat) and the history's summary."""
        beats, interval = job.ctx.beats, job.heartbeat
        watchers = []
        if interval is not None:
            misses = self._settings.heartbeat_misses
            watchers.append(asyncio.create_task(_watch(beats, interval, misses, stop)))
        if self._emit is not None:
            ctx = job.ctx
            ids = {"run_id": ctx.run_id, "schedule": ctx.schedule, "task": ctx.task, **where()}
            every = interval or UNDECLARED_SUMMARY_SECONDS
            summary = summarize(beats, every, self._emit, {**ids, "attempt": ctx.attempt})
            watchers.append(asyncio.create_task(summary))
        return watchers


def _crash_loop(count: int) -> Result:
    # As worker/crashloop.py for deliveries: a run whose workers keep dying ends, replayable.
    why = f"handed over {count} times: its workers died or lost the broker while running it"
    return Result(Outcome.TERMINAL, "crash-loop", why)


async def _watch(beats: Beats, interval: float, misses: int, stop: asyncio.Future[Result]) -> None:
    why = await silence(beats, interval, misses)
    if not stop.done():
        stop.set_result(Result(Outcome.RETRYABLE, HUNG, why))
