"""The fate table: every attempt result and remaining plan maps to one action."""

from __future__ import annotations

import pytest

from warren_cron.worker.attempt import SUCCESS, Outcome, Result
from warren_cron.worker.fate import ACKED, Action, decide

RETRYABLE = Result(Outcome.RETRYABLE, "exception", "boom")
TERMINAL = Result(Outcome.TERMINAL, "permanent-error", "bad input")
CONTENDED = Result(Outcome.CONTENDED, "lock-contended", "another run holds the lock")
REPLACED = Result(Outcome.REPLACED, "replaced", "replaced by job@2026-01-01T00:00:00Z")


@pytest.mark.parametrize(
    ("result", "key", "action", "reason"),
    [
        (SUCCESS, "30s-1m", Action.ACK, "succeeded"),
        (SUCCESS, "final", Action.ACK, "succeeded"),
        (RETRYABLE, "30s-1m", Action.RETRY, "exception"),
        (RETRYABLE, "final", Action.FAIL, "retries-exhausted"),
        (RETRYABLE, "nonsense", Action.FAIL, "invalid-retry-plan"),
        (TERMINAL, "30s-1m", Action.FAIL, "permanent-error"),
        (TERMINAL, "final", Action.FAIL, "permanent-error"),
        (CONTENDED, "30s-1m", Action.CONTENDED, "lock-contended"),
        (CONTENDED, "final", Action.CONTENDED, "lock-contended"),
        (REPLACED, "30s-1m", Action.REPLACED, "replaced"),
        (REPLACED, "final", Action.REPLACED, "replaced"),
    ],
)
def test_decide_follows_the_fate_table(
    result: Result, key: str, action: Action, reason: str
) -> None:
    """Success acks, retryable NACKs until final, terminal fails; overlap outcomes ack."""
    verdict = decide(result, key)
    assert (verdict.action, verdict.reason) == (action, reason)


def test_a_failed_verdict_keeps_the_last_error() -> None:
    """The failure record will say what went wrong on the last attempt."""
    assert decide(RETRYABLE, "final").error == "boom"


def test_overlap_outcomes_are_acked_without_a_failure_record() -> None:
    """Lock-contended and replaced runs are settled by an ack, like a success."""
    assert {decide(r, "final").action for r in (CONTENDED, REPLACED)} <= ACKED
    assert Action.FAIL not in ACKED and Action.RETRY not in ACKED
