"""What a replay publishes, without a broker: the task again, its failures kept as history."""

from __future__ import annotations

from datetime import timedelta

import aio_pika
import pytest

from tests.wire import ENVELOPE, MAIN, T0, death, delivered, incoming, task_message, worker_delivery
from warren_cron import codec
from warren_cron.failed.replay_message import HISTORY_LIMIT, replay_headers, replay_message
from warren_cron.headers import attempt_number
from warren_cron.names import FAILED_KEY
from warren_cron.plan import RetryPlan, task_plan
from warren_cron.records import FailedRecord, Failure, failure_record, read_record, record_from

HISTORY = [death(MAIN, "rejected", 3, time=T0)]
LATER = T0 + timedelta(hours=1)


def failed_again(message: aio_pika.Message, failure: Failure) -> FailedRecord:
    """The record a worker writes when ``message`` fails, as the failed queue gives it back."""
    record = failure_record(worker_delivery(message), failure)
    return read_record(incoming(record, FAILED_KEY), MAIN)


def first_failure() -> FailedRecord:
    """A task that spent its plan: four attempts, the broker's history, then a record."""
    message = task_message(custom="kept", **{"x-death": HISTORY})
    return failed_again(message, Failure("retries-exhausted", "RuntimeError: boom", 4))


def test_a_replay_sends_the_task_headers_with_its_failure_as_history() -> None:
    """Task headers stay; the record's cron-* headers and x-death move into cron-history."""
    record = first_failure()
    headers = replay_headers(record)
    assert set(headers) == {
        "cron-run-id",
        "cron-schedule",
        "custom",
        "cron-history",
        "cron-replays",
    }
    assert (headers["cron-run-id"], headers["cron-schedule"]) == ("nightly@1", "nightly")
    assert headers["cron-replays"] == 1
    [entry] = headers["cron-history"]
    assert entry == {
        "reason": "retries-exhausted",
        "attempts": 4,
        "replay": 0,
        "x-death": record.history,
        "error": "RuntimeError: boom",
        "failed-at": record.headers["cron-failed-at"],
        "routing-key": "final",
    }


def test_a_replayed_task_runs_as_attempt_one_with_a_fresh_plan() -> None:
    """No x-death travels with the replay, so the worker counts attempts from 1 again."""
    message = replay_message(first_failure(), now=LATER)
    assert "x-death" not in (message.headers or {})
    assert attempt_number(delivered(message, "1s").header.properties.headers, MAIN) == 1


def test_a_replayed_message_is_the_same_task_stamped_now() -> None:
    """Same body and run id, persistent, content type kept, timestamp of the replay."""
    record = first_failure()
    message = replay_message(record, now=LATER)
    assert (message.body, message.message_id) == (codec.encode(ENVELOPE), "nightly@1")
    assert message.delivery_mode is aio_pika.DeliveryMode.PERSISTENT
    assert (message.content_type, message.timestamp) == ("application/json", LATER)
    assert message.expiration is None


def test_a_task_that_fails_after_a_replay_says_replay_one_and_keeps_both_failures() -> None:
    """The new record counts its own attempts; the earlier failure is still in its history."""
    replayed = replay_message(first_failure(), now=LATER)
    again = failed_again(replayed, Failure("retries-exhausted", "RuntimeError: again", 2))
    assert (again.replays, again.attempts, again.error) == (1, 2, "RuntimeError: again")
    assert again.history == []  # the broker's history of the new run: none here
    second = replay_headers(again)
    assert second["cron-replays"] == 2
    assert [(e["replay"], e["attempts"]) for e in second["cron-history"]] == [(1, 2), (0, 4)]


def test_the_history_keeps_only_the_newest_failures() -> None:
    """After many replays cron-history holds the last HISTORY_LIMIT so headers fit a frame."""
    record = first_failure()
    for n in range(HISTORY_LIMIT + 3):
        message = replay_message(record, now=LATER)
        record = failed_again(message, Failure("exception", f"failure {n}", 1))
    history = replay_headers(record)["cron-history"]
    assert len(history) == HISTORY_LIMIT
    assert [entry["replay"] for entry in history] == [8, 7, 6, 5, 4]
    assert history[0]["error"] == f"failure {HISTORY_LIMIT + 2}"


def test_a_replay_of_a_record_the_broker_dead_lettered_alone_keeps_its_derived_reason() -> None:
    """The broker's own history and the derived reason go into cron-history, x-death goes."""
    message = task_message(**{"x-death": [death(MAIN, "delivery_limit", time=T0)]})
    record = read_record(incoming(message, "final"), MAIN)
    headers = replay_headers(record)
    assert "x-death" not in headers
    [entry] = headers["cron-history"]
    assert (entry["reason"], entry["attempts"], entry["failed-at"]) == (
        "delivery-limit",
        0,
        T0.isoformat(),
    )
    assert [d["reason"] for d in entry["x-death"]] == ["delivery_limit"]


def test_a_record_with_nothing_known_replays_with_a_bare_history_entry() -> None:
    """No run id, error, time or key: the entry says only why, and no run id is invented."""
    record = record_from(b"{}", {"cron-reason": "decode-error", "cron-history": "junk"}, None, MAIN)
    headers = replay_headers(record)
    assert headers["cron-history"] == [
        {"reason": "decode-error", "attempts": 0, "replay": 0, "x-death": []}
    ]
    assert "cron-run-id" not in headers
    message = replay_message(record, now=LATER)
    assert message.message_id is None
    delivered(message, "1s")  # the headers can be sent


def test_a_replay_uses_the_override_else_the_schedules_plan_else_the_default() -> None:
    """``--max-retries`` wins; else the plan of the schedule in the schedules file; else the env."""
    default, own, override = RetryPlan((30_000,)), RetryPlan((1_000, 2_000)), RetryPlan(())
    plans = {"nightly": own}
    chosen = task_plan("nightly", default=default, override=override, schedule_plans=plans)
    assert chosen == override
    assert task_plan("nightly", default=default, schedule_plans=plans) == own
    assert task_plan("hourly", default=default, schedule_plans=plans) == default
    assert task_plan(None, default=default, schedule_plans=plans) == default
    assert task_plan("nightly", default=default) == default


@pytest.mark.parametrize("replays", ["2", b"2", 2.0])
def test_the_replay_count_goes_on_from_a_count_sent_as_text(replays: object) -> None:
    """A cron-replays header sent as text or a float still counts on by one."""
    record = record_from(b"{}", {"cron-reason": "exception", "cron-replays": replays}, None, MAIN)
    assert replay_headers(record)["cron-replays"] == 3
