"""Each kind of failure a handler raises reaches the record, history and metrics as its reason."""

from __future__ import annotations

from typing import Any

import pytest

from tests.test_http import CTX
from warren_cron.clock import utcnow
from warren_cron.envelope import Envelope
from warren_cron.errors import (
    DestinationDenied,
    PermanentError,
    RetryableError,
    SecretUnavailable,
)
from warren_cron.worker.attempt import Outcome, run_attempt
from warren_cron.worker.http import HttpStatusError, HttpTimeout
from warren_cron.worker.registry import Registry


@pytest.mark.parametrize(
    ("error", "outcome", "reason"),
    [
        (DestinationDenied("no"), Outcome.TERMINAL, "destination-denied"),
        (SecretUnavailable("no"), Outcome.TERMINAL, "secret-unavailable"),
        (PermanentError("no"), Outcome.TERMINAL, "permanent-error"),
        (HttpTimeout("slow"), Outcome.RETRYABLE, "timeout"),
        (HttpStatusError("HTTP 503", 503), Outcome.RETRYABLE, "exception"),
        (RetryableError("later"), Outcome.RETRYABLE, "exception"),
        (RuntimeError("boom"), Outcome.RETRYABLE, "exception"),
    ],
)
async def test_an_error_s_class_names_the_reason_of_the_attempt(
    error: Exception, outcome: Outcome, reason: str
) -> None:
    """The reason an attempt is recorded with comes from the error's class."""

    async def failing(payload: Any, ctx: Any) -> None:
        raise error

    registry = Registry()
    registry.register("failing", failing)
    envelope = Envelope(task="failing", run_id="r", scheduled_for=utcnow())
    result = await run_attempt(registry, envelope, CTX)
    assert (result.outcome, result.reason) == (outcome, reason)
