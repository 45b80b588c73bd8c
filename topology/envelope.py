"""The task: one frozen envelope, sent as JSON (``warren_cron.codec`` writes and reads it)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal
from uuid import uuid4

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field

from warren_cron.clock import utcnow
from warren_cron.flowlimits import FlowLimits
from warren_cron.jsonvalue import Json

CONTENT_TYPE = "application/json"
#: The longest task name: a one-off run id holds it, and run ids are at most 300 characters.
MAX_TASK = 200
TASK_FORM = (
    f"a task name is 1 to {MAX_TASK} printable characters (no control characters, tabs or "
    "line breaks), without spaces around it, as a worker registers it"
)


def check_task(value: str) -> str:
    """``value`` when it can name a task, the one rule of every entry (client, API, command,
    schedules) and of the worker; else ValueError saying what a task name is."""
    # Printable: a run id holds the name and is looked up, cancelled and shown as text.
    if not (0 < len(value) <= MAX_TASK and value.isprintable() and value == value.strip()):
        raise ValueError(f"{value[:60]!a}: {TASK_FORM}")
    return value


#: A task name, checked by ``check_task`` (its lengths in the schema for the API's document).
TaskName = Annotated[
    str,
    AfterValidator(check_task),
    Field(description=TASK_FORM, json_schema_extra={"minLength": 1, "maxLength": MAX_TASK}),
]


class Envelope(BaseModel):
    """What to run, with what input, for which fire of which schedule."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    task: TaskName
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
