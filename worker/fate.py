"""The one place that decides and carries out a message's fate after an attempt.

| attempt result                  | action                                               |
| ------------------------------- | ---------------------------------------------------- |
| succeeded                       | ack                                                  |
| retryable, plan not spent       | NACK without requeue: the broker moves it to a retry queue |
| retryable with `Retry-After`    | a copy through the delay levels, then ack (`worker/later.py`) |
| retryable, plan spent (`final`) | confirmed failure record, then ack                   |
| terminal                        | confirmed failure record, then ack                   |
| lock-contended, replaced        | ack: the overlap policy settled it, no retry spent   |
| deferred (circuit open)         | a copy through the delay levels, then ack; no attempt spent |
| cancelled (its run was)         | ack: not run, or stopped; never retried                |

A failure record is tried again while its publishing channel is reopened after a reconnect
(``RECORD_TIMEOUT_SECONDS`` in all). One that cannot be published is never acked: the message
is NACKed instead, and the broker dead-letters it (``final`` lands in the failed queue by
binding, anything else in the next retry queue or, for an unknown plan, the DLX's alternate
exchange).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum

import structlog
from aio_pika.abc import AbstractExchange
from aio_pika.message import Message
from aiormq.exceptions import ChannelInvalidStateError

from warren_cron.clock import utcnow
from warren_cron.errors import CONNECTION_ERRORS, FAILED_OR_CUT, being_cancelled
from warren_cron.names import FAILED_KEY, FINAL_KEY
from warren_cron.plan import RetryPlan, is_retry_key
from warren_cron.records import Failure, Received, failure_record
from warren_cron.worker.attempt import EXPIRED, SUCCESS, Outcome, Result
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.later import Later
from warren_cron.worker.retry_after import retry_after_hold

log = structlog.get_logger("warren_cron.worker.fate")
#: How long a failure record may wait for its confirm before the message is NACKed instead.
RECORD_TIMEOUT_SECONDS = 10.0
#: Pause between two tries of a record while its channel is being restored after a reconnect.
RECORD_RETRY_SECONDS = 0.1
#: Errors of a publishing channel lost with its connection: publish again once it is back.
RESTORABLE: tuple[type[BaseException], ...] = (*CONNECTION_ERRORS, ChannelInvalidStateError)


class Action(Enum):
    """What happens to the message."""

    ACK = "succeeded"
    RETRY = "retrying"
    FAIL = "failed"
    #: Acked without running, no retry spent (overlap policy ``Forbid``).
    CONTENDED = "lock-contended"
    #: Acked after a newer run cancelled it, no retry spent (overlap policy ``Replace``).
    REPLACED = "replaced"
    #: Not run: a copy waits in the delay levels, no attempt spent (flow control).
    DEFER = "deferred"
    #: Acked: its run was cancelled before or while it ran (``worker/cancels.py``).
    CANCELLED = "cancelled"


#: Actions that ack the message: its fate is settled without a failure record.
ACKED = frozenset({Action.ACK, Action.CONTENDED, Action.REPLACED, Action.CANCELLED})
#: Outcomes settled without a retry (overlap policy, cancel) and the action each one takes.
_OVERLAP = {
    Outcome.CONTENDED: Action.CONTENDED,
    Outcome.REPLACED: Action.REPLACED,
    Outcome.CANCELLED: Action.CANCELLED,
}


@dataclass(frozen=True, slots=True)
class Verdict:
    """The decided action, with the reason recorded if the task fails."""

    action: Action
    reason: str
    error: str | None = None
    #: Seconds the next attempt waits in the delay levels instead of the plan's retry queue.
    hold: int | None = None
    #: The flow-control key that deferred or failed it (history's ``key``), else None.
    key: str | None = None


#: The verdict on ``SUCCESS``, the result of most attempts.
ACK_SUCCESS = Verdict(Action.ACK, SUCCESS.reason)


def decide(
    result: Result,
    routing_key: str,
    deadline: datetime | None = None,
    max_delay_ms: int | None = None,
) -> Verdict:
    """Map an attempt's result, the message's remaining plan and the task's deadline to an
    action; ``max_delay_ms`` caps a ``Retry-After`` (``CRON_RETRY_MAX_DELAY_MS``)."""
    if result is SUCCESS:
        return ACK_SUCCESS  # most attempts: no verdict to build
    if result.outcome is Outcome.SUCCEEDED:
        return Verdict(Action.ACK, result.reason)
    if result.outcome in _OVERLAP:
        return Verdict(_OVERLAP[result.outcome], result.reason, result.error)
    if result.outcome is Outcome.DEFERRED:
        return _deferred(result, deadline)
    if result.outcome is Outcome.TERMINAL:
        return Verdict(Action.FAIL, result.reason, result.error)
    if routing_key == FINAL_KEY:
        return Verdict(Action.FAIL, "retries-exhausted", result.error)
    if not is_retry_key(routing_key):
        error = f"routing key {routing_key!r} is no retry plan; last error: {result.error}"
        return Verdict(Action.FAIL, "invalid-retry-plan", error)
    asked = result.retry_after
    hold = None if asked is None else retry_after_hold(asked, routing_key, max_delay_ms)
    starts = retry_starts(routing_key) if hold is None else utcnow() + timedelta(seconds=hold)
    if deadline is not None and starts > deadline:
        error = f"the next retry would start after the deadline {deadline}; last error: "
        return Verdict(Action.FAIL, EXPIRED, error + str(result.error))
    return Verdict(Action.RETRY, result.reason, result.error, hold)


def _deferred(result: Result, deadline: datetime | None) -> Verdict:
    hold = math.ceil(result.retry_after or 0)
    if deadline is not None and utcnow() + timedelta(seconds=hold) > deadline:
        error = f"deferred past the deadline {deadline}: {result.error}"
        return Verdict(Action.FAIL, EXPIRED, error, key=result.key)
    return Verdict(Action.DEFER, result.reason, result.error, hold, result.key)


def retry_starts(routing_key: str) -> datetime:
    """When the next retry of a message with this remaining plan would start, at the soonest."""
    delay_ms = RetryPlan.from_key(routing_key).delays_ms[0]
    return utcnow() + timedelta(milliseconds=delay_ms)


class Settler:
    """Carries out verdicts: ack, NACK, or publish a failure record then ack."""

    def __init__(
        self,
        dlx: AbstractExchange,
        later: Later | None = None,
        restored: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._dlx = dlx
        self._later = later
        #: Waits until the publishing channel is back after a reconnect (robust channels).
        self._restored = restored

    async def settle(
        self, message: Delivery, verdict: Verdict, attempt: int, run_id: str | None
    ) -> None:
        """Carry out ``verdict``; the message is acked only once its fate is safe."""
        action = verdict.action
        if action is Action.ACK or action in ACKED:  # ``is`` first: an enum hashes in Python
            await message.ack()
        elif action is Action.RETRY:
            await self._retry(message, verdict, attempt, run_id)
        elif action is Action.DEFER:
            await self._defer(message, verdict, attempt, run_id)
        else:
            await self.fail(message, Failure(verdict.reason, verdict.error, attempt), run_id)

    async def _retry(
        self, message: Delivery, verdict: Verdict, attempt: int, run_id: str | None
    ) -> None:
        if verdict.hold is not None and self._later is not None:
            rest = RetryPlan.from_key(message.routing_key).rest().key
            if await self._later.send(message, verdict.hold, rest, attempt, run_id):
                await message.ack()
                return
        await message.reject()

    async def _defer(
        self, message: Delivery, verdict: Verdict, attempt: int, run_id: str | None
    ) -> None:
        assert self._later is not None and verdict.hold is not None
        # Same plan, one attempt fewer than this one's number: the deferred attempt is unspent.
        sent = await self._later.send(
            message, verdict.hold, message.routing_key, attempt - 1, run_id
        )
        await (message.ack() if sent else message.reject())

    async def fail(
        self,
        message: Delivery,
        failure: Failure,
        run_id: str | None,
        recorded: Received | None = None,
    ) -> None:
        """Publish the failure record of ``recorded`` (the message itself unless given), then
        ack ``message``; NACK it when the record is not confirmed."""
        record = failure_record(recorded or message, failure, run_id=run_id)
        try:
            await asyncio.wait_for(self._publish(record), RECORD_TIMEOUT_SECONDS)
        except FAILED_OR_CUT as error:
            if being_cancelled():  # aiormq's own CancelledError (a stuck drop) is a failure
                raise
            log.warning(
                "failure record not confirmed; dead-lettering instead",
                run_id=run_id,
                error=repr(error),
            )
            await message.reject()
            return
        await message.ack()

    async def _publish(self, record: Message) -> None:
        # The consuming connection can come back from a broker restart before the publishing
        # one: a record tried once then would be dead-lettered without its reason.
        while True:
            try:
                await self._dlx.publish(record, FAILED_KEY, mandatory=True)
            except RESTORABLE:
                if self._restored is None:
                    raise
                # ready() can return before a channel the broker closed is reopened.
                await self._restored()
                await asyncio.sleep(RECORD_RETRY_SECONDS)
            else:
                return
