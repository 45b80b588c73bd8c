"""Limits checked before a body is decoded: a task message is a job description, not data."""

from __future__ import annotations

from warren_cron.worker.attempt import Outcome, Result


def body_too_large(body: bytes, limit: int) -> Result | None:
    """A terminal result when ``body`` is above ``limit`` bytes, else None."""
    if len(body) <= limit:
        return None
    return Result(
        Outcome.TERMINAL,
        "body-too-large",
        f"task body is {len(body)} bytes, above CRON_MAX_BODY_BYTES ({limit}); "
        "keep large inputs in storage and pass a reference in the payload",
    )
