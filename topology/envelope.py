"""The task message: one frozen envelope, JSON on the wire, with the headers of every attempt."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import uuid4

import orjson
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError

from warren_cron.clock import utcnow
from warren_cron.errors import MessageDecodeError, validation_problems
from warren_cron.headers import H_RUN_ID, H_SCHEDULE
from warren_cron.jsonvalue import DECODED, Json

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

    def encode(self) -> bytes:
        """Serialise to the JSON body published on the wire."""
        return orjson.dumps(self.model_dump(mode="json"))

    @classmethod
    def decode(cls, body: bytes) -> Envelope:
        """Parse and validate a body, or raise ``MessageDecodeError`` saying what is wrong."""
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as error:
            raise MessageDecodeError(f"body is not valid UTF-8 JSON: {error}") from None
        if not isinstance(data, dict):
            raise MessageDecodeError(f"body must be a JSON object, got {type(data).__name__}")
        try:
            return cls.model_validate(data, context=DECODED)
        except ValidationError as error:
            problems = "; ".join(validation_problems(error, whole="body"))
            raise MessageDecodeError(f"invalid task envelope: {problems}") from None

    def headers(self) -> dict[str, Any]:
        """Headers sent with every attempt so handlers and tools need not parse the body."""
        headers: dict[str, Any] = {H_RUN_ID: self.run_id}
        if self.schedule is not None:
            headers[H_SCHEDULE] = self.schedule
        return headers


def one_off_run_id(task: str, now: datetime | None = None) -> str:
    """Run id of a task enqueued by hand: unique, readable, sortable."""
    stamp = (now or utcnow()).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"once:{task}@{stamp}-{uuid4().hex[:8]}"
