"""The API's bodies, queries and answers: pydantic models that validate requests and, through
``openapi.py``, are the OpenAPI document's schemas."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

#: A schedule's fields: validated by the store (each problem named as the file's are);
#: documented as the schedules file's table (``openapi.py`` adds its schema; a bare ``$ref``
#: would be looked up by pydantic among its own).
SpecFields = Annotated[
    dict[str, Any], WithJsonSchema({"allOf": [{"$ref": "#/components/schemas/ScheduleSpec"}]})
]
Reason = Annotated[str, Field(min_length=1, max_length=300, description="why; kept in history")]
#: The largest version a request may name: the largest integer JSON keeps exactly (a
#: schedule changed once a second would reach it in 285 million years).
MAX_VERSION = 2**53 - 1


class Strict(BaseModel):
    """A body or query: unknown fields are refused, so a typo is not silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class CreateBody(Strict):
    """Create a runtime schedule (or again one that was archived)."""

    spec: SpecFields
    reason: Reason | None = None


class UpdateBody(Strict):
    """Change fields of a runtime schedule; a field set to null goes back to its default."""

    version: int = Field(
        ge=1, le=MAX_VERSION, description="the version you read; 409 if another came first"
    )
    changes: dict[str, Any] = Field(min_length=1, description="the fields that change")
    reason: Reason | None = None


class ArchiveQuery(Strict):
    """Archive a runtime schedule: it stops for good, its history stays."""

    version: int | None = Field(
        None, ge=1, le=MAX_VERSION, description="only if this is still the version"
    )
    reason: Reason | None = None


class PauseBody(Strict):
    """Pause a schedule: its fires are skipped until it is resumed."""

    reason: Reason


class ResumeBody(Strict):
    """Resume a schedule."""

    catch_up: bool = Field(False, description="publish the fires missed while paused")
    reason: Reason | None = None


class TriggerBody(Strict):
    """Publish one run of a schedule now."""

    reason: Reason | None = None


class ScheduleRow(BaseModel):
    """A schedule as ``warren schedules list --json`` shows it."""

    name: str
    source: Literal["file", "runtime"]
    status: Literal["active", "paused", "disabled", "completed", "archived"]
    version: int | None = Field(None, description="runtime schedules only")
    fires: str
    next_fire_at: str | None
    paused: bool
    paused_since: str | None
    paused_by: str | None
    reason: str | None = Field(description="why it is paused")


class ScheduleList(BaseModel):
    """Every schedule: the file's, then the runtime ones (archived too)."""

    schedules: list[ScheduleRow]


class Change(BaseModel):
    """One change of a runtime schedule's history."""

    kind: Literal["create", "update", "archive"]
    version: int
    previous: int
    by: str
    at: str
    reason: str | None


class Schedule(ScheduleRow):
    """A schedule with its fields and, for a runtime one, the history of its changes."""

    spec: SpecFields
    history: list[Change]


class Done(BaseModel):
    """What a pause, resume or trigger did."""

    name: str
    changed: bool = Field(description="false: nothing to do (paused already, or not paused)")
    message: str
    run_id: str | None = Field(None, description="trigger: the run published")


class ErrorDetail(BaseModel):
    """What was refused and what to fix; some codes add fields (``expected``, ``current``,
    ``problems``, ``limit``)."""

    model_config = ConfigDict(extra="allow")

    code: str
    message: str


class ErrorBody(BaseModel):
    """Every refusal."""

    error: ErrorDetail
