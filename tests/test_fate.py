"""The fate table: every attempt result and remaining plan maps to one action."""

from __future__ import annotations

import pytest

from worker.attempt import SUCCESS, Outcome, Result
from worker.fate import Action, decide

RETRYABLE = Result(Outcome.RETRYABLE, "exception", "boom")
TERMINAL = Result(Outcome.TERMINAL, "permanent-error", "bad input")


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
    ],
)
def test_decide_follows_the_fate_table(
    result: Result, key: str, action: Action, reason: str
) -> None:
    """Success acks, retryable NACKs until final, terminal and spent plans fail."""
    verdict = decide(result, key)
    assert (verdict.action, verdict.reason) == (action, reason)


def test_a_failed_verdict_keeps_the_last_error() -> None:
    """The failure record will say what went wrong on the last attempt."""
    assert decide(RETRYABLE, "final").error == "boom"
