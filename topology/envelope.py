"""The task: one frozen envelope, sent as JSON (``warren_cron.codec`` writes and reads it)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import uuid4

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from warren_cron.clock import utcnow
from warren_cron.flowlimits import FlowLimits
from warren_cron.jsonvalue import Json

CONTENT_TYPE = "application/json"


class Envelope(BaseModel):
    """What to run, with what input, for which fire of which schedule."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    task: str = Field(min_length=1, max_length=200)
    payload: Json = None
    run_id: str = Field(min_length=1, max_length=500)
    schedule: str | None = None
    scheduled_for: AwareDatetime
    timeout_seconds: float | None = Field(None, gt=0)
    deadline: AwareDatetime | None = None
    #: Overlap policy of the schedule: Forbid and Replace hold a lock while an attempt runs.
    concurrency: Literal["Allow", "Forbid", "Replace"] = "Allow"
    #: The schedule's own concurrency and rate limits, applied by every worker.
    limits: FlowLimits | None = None


def one_off_run_id(task: str, now: datetime | None = None) -> str:
    """Run id of a task enqueued by hand: unique, readable, sortable."""
    stamp = (now or utcnow()).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"once:{task}@{stamp}-{uuid4().hex[:8]}"
