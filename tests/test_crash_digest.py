"""Crash-loop rules without a broker: marker names, the verdicts, and the quorum count."""

from __future__ import annotations

import re
from typing import Any, cast

from aio_pika.abc import AbstractRobustConnection

from tests.wire import ENVELOPE, MAIN, incoming, task_message, worker_delivery
from warren_cron.names import FAILED_KEY, Names
from warren_cron.records import Failure, failure_record, read_record
from warren_cron.worker.attempt import Outcome
from warren_cron.worker.crashloop import (
    UNMARKED,
    CrashGuard,
    crash_loop,
    delivery_limit,
    marker_key,
)
from warren_cron.worker.fate import Action, decide
from warren_cron.worker.settings import WorkerSettings


def guard(queue_type: str, **settings: Any) -> CrashGuard:
    """The crash guard of a worker on ``queue_type`` queues."""
    return CrashGuard(WorkerSettings(queue_type=queue_type, **settings))


class Connection:
    """A publishing connection that hands out ``channel``."""

    def __init__(self, channel: object) -> None:
        self._channel = channel

    async def channel(self, publisher_confirms: bool = True) -> object:
        """The one channel of this connection."""
        return self._channel


class ClosedChannel:
    """A channel aio-pika has closed: every call raises its bare RuntimeError."""

    async def declare_queue(self, *args: object, **kwargs: object) -> None:
        """Refused: the channel is closed."""
        raise RuntimeError("channel closed")

    async def queue_delete(self, *args: object, **kwargs: object) -> None:
        """Refused: the channel is closed."""
        raise RuntimeError("channel closed")


async def opened(crashes: CrashGuard, channel: object) -> CrashGuard:
    """``crashes`` opened on a connection whose channel is ``channel``."""
    await crashes.open(cast(AbstractRobustConnection, Connection(channel)))
    return crashes


def test_a_marker_key_names_one_attempt_of_one_run() -> None:
    """Same run and attempt, same key; another attempt or another run, another key."""
    key = marker_key("nightly@1", b"body", 1)
    assert re.fullmatch(r"[0-9a-f]{32}", key)
    assert marker_key("nightly@1", b"other body", 1) == key
    assert len({key, marker_key("nightly@1", b"body", 2), marker_key("nightly@2", b"body", 1)}) == 3


def test_without_a_run_id_the_body_names_the_message() -> None:
    """A foreign message with no message id is told apart by its body."""
    for missing in (None, ""):
        assert marker_key(missing, b"a", 1) == marker_key(None, b"a", 1)
        assert marker_key(missing, b"a", 1) != marker_key(None, b"b", 1)


def test_a_marker_queue_is_named_after_the_namespace_and_the_key() -> None:
    """``<ns>_crash.<digest>``: found and cleaned up with the rest of the namespace."""
    key = marker_key("nightly@1", b"", 1)
    assert Names("billing").crash_queue(key) == f"billing_crash.{key}"


def test_a_crash_loop_is_terminal_and_says_what_to_do() -> None:
    """The error names the deaths, the attempt, the setting and the fix."""
    result = crash_loop(3, 2, 3)
    assert (result.outcome, result.reason) == (Outcome.TERMINAL, "crash-loop")
    assert result.error is not None
    for part in ("died 3 times", "attempt 2", "CRON_CRASH_LOOP_LIMIT=3", "replay"):
        assert part in result.error


def test_a_delivery_limit_is_terminal_and_says_what_to_do() -> None:
    """The error names the hand-backs, the setting and the fix."""
    result = delivery_limit(5, 5)
    assert (result.outcome, result.reason) == (Outcome.TERMINAL, "delivery-limit")
    assert result.error is not None
    for part in ("handed back unsettled 5 times", "CRON_DELIVERY_LIMIT=5", "replay"):
        assert part in result.error


def test_a_crash_looping_task_is_failed_even_with_retries_left() -> None:
    """Neither verdict spends a retry: the task goes to the failed queue at once."""
    for result in (crash_loop(3, 1, 3), delivery_limit(10, 10)):
        verdict = decide(result, "30s-1m")
        assert (verdict.action, verdict.reason) == (Action.FAIL, result.reason)


def test_the_record_of_a_crash_loop_reads_as_crash_loop_with_its_error() -> None:
    """The failed queue lists it with reason crash-loop and the error naming the limit."""
    result = crash_loop(3, 1, 3)
    verdict = decide(result, "30s")
    message = worker_delivery(task_message(), routing_key="30s")
    written = failure_record(message, Failure(verdict.reason, verdict.error, 1))
    record = read_record(incoming(written, FAILED_KEY), MAIN)
    assert (record.run_id, record.reason, record.attempts) == (ENVELOPE.run_id, "crash-loop", 1)
    assert record.error == result.error


async def test_on_quorum_queues_the_last_delivery_the_broker_allows_is_not_run() -> None:
    """Handed back CRON_DELIVERY_LIMIT times: the next delivery is failed as delivery-limit."""
    crashes = guard("quorum", delivery_limit=3)
    for count in (3, 4):
        delivery = worker_delivery(task_message(**{"x-delivery-count": count}))
        mark = await crashes.enter(delivery, 1)
        assert mark.looping == delivery_limit(count, 3)
        assert mark.queue is None  # quorum queues count deliveries themselves: no marker


async def test_on_quorum_queues_a_task_below_the_limit_runs() -> None:
    """A first delivery, or one handed back fewer times than the limit, runs unmarked."""
    crashes = guard("quorum", delivery_limit=3)
    for headers in ({}, {"x-delivery-count": 0}, {"x-delivery-count": 2}):
        delivery = worker_delivery(task_message(**headers))
        assert await crashes.enter(delivery, 1) == UNMARKED


async def test_on_classic_queues_a_first_delivery_costs_no_marker() -> None:
    """A task delivered for the first time touches no marker queue before or after it runs."""
    crashes = await opened(guard("classic"), object())  # any call on it would raise
    delivery = worker_delivery(task_message())
    mark = await crashes.enter(delivery, 1)
    assert mark == UNMARKED
    await crashes.leave(mark, settled=True)


async def test_on_classic_queues_a_marker_that_cannot_be_placed_never_fails_the_attempt() -> None:
    """A redelivered task whose marker the broker refuses runs unmarked, and leaves cleanly."""
    crashes = await opened(guard("classic"), ClosedChannel())
    delivery = worker_delivery(task_message(), redelivered=True)
    mark = await crashes.enter(delivery, 1)
    assert (mark.looping, mark.placed) == (None, False)
    await crashes.leave(mark, settled=True)
