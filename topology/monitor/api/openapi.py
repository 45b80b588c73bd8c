"""The OpenAPI 3.1 document, made from the route table and its pydantic models: an endpoint
is described where it is declared, never a second time."""

from __future__ import annotations

import re
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any, Literal

import orjson
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from warren_cron.monitor.api.models import ErrorBody
from warren_cron.monitor.api.routes import BASE, Endpoint
from warren_cron.schedules.spec import ScheduleSpec

REF = "#/components/schemas/{model}"
#: The prefix of the components that are a task's payload schema (``with_tasks``).
PAYLOAD = "TaskPayload."
_PARAMETER = re.compile(r"\{(\w+)\}")
_STATUS_TEXT = {
    200: "done",
    201: "created",
    400: "invalid input: the message names the field",
    401: "no token, or a wrong one",
    403: "the token's role is too low",
    404: "no such schedule",
    409: "a conflict: another change came first, the name is taken, or the run ended",
    413: "the body is too large",
    415: "the body is not JSON",
    422: "no live worker registered the task: the message names the known ones",
    429: "too many wrong tokens from this address: wait Retry-After seconds",
    500: "the monitor failed on the request in a way nobody foresaw; it is logged",
}
Mode = Literal["validation", "serialization"]


def document(endpoints: Sequence[Endpoint]) -> dict[str, Any]:
    """The OpenAPI document of ``endpoints``."""
    refs, schemas = _schemas(endpoints)
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in endpoints:
        operation = _operation(endpoint, refs)
        paths.setdefault(BASE + endpoint.path, {})[endpoint.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "warren", "version": version("warren-cron")},
        "paths": paths,
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def with_tasks(base: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """``base`` with the tasks live workers registered: their names on ``POST /runs``
    (``x-known-tasks``) and each typed payload's schema as ``TaskPayload.<task>``."""
    schemas = dict(base["components"]["schemas"])
    for task, schema in known.items():
        if schema is not None:
            schemas.update(_task_schemas(task, schema))
    enqueue = {**base["paths"][BASE + "/runs"]["post"], "x-known-tasks": list(known)}
    paths = {**base["paths"], BASE + "/runs": {**base["paths"][BASE + "/runs"], "post": enqueue}}
    return {**base, "paths": paths, "components": {**base["components"], "schemas": schemas}}


def _task_schemas(task: str, schema: dict[str, Any]) -> dict[str, Any]:
    """A task's payload schema and the models it refers to, as components of the document."""
    text = orjson.dumps(schema).decode().replace('"#/$defs/', f'"{REF.format(model=PAYLOAD)}')
    moved = orjson.loads(text)
    defs = moved.pop("$defs", {})
    name = re.sub(r"[^A-Za-z0-9._-]", "_", task)
    return {f"{PAYLOAD}{name}": moved} | {f"{PAYLOAD}{key}": value for key, value in defs.items()}


def _schemas(
    endpoints: Sequence[Endpoint],
) -> tuple[dict[tuple[type[BaseModel], Mode], dict[str, Any]], dict[str, Any]]:
    models: list[tuple[type[BaseModel], Mode]] = [
        (ErrorBody, "serialization"),
        (ScheduleSpec, "validation"),
    ]
    for endpoint in endpoints:
        if endpoint.body is not None:
            models.append((endpoint.body, "validation"))
        if endpoint.answer is not None:
            models.append((endpoint.answer, "serialization"))
    refs, schemas = models_json_schema(list(dict.fromkeys(models)), ref_template=REF)
    return {
        (model, mode): ref for (model, mode), ref in refs.items() if issubclass(model, BaseModel)
    }, schemas


def _operation(
    endpoint: Endpoint, refs: dict[tuple[type[BaseModel], Mode], dict[str, Any]]
) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "summary": endpoint.summary,
        "operationId": endpoint.handler.__name__,
        "parameters": _parameters(endpoint),
        "responses": _responses(endpoint, refs),
        "security": [] if endpoint.role is None else [{"bearer": []}],
    }
    if endpoint.role is not None:
        operation["description"] = f"Needs a token of role `{endpoint.role}` or above."
    if endpoint.body is not None:
        operation["requestBody"] = {
            "required": endpoint.body_required,
            "content": {"application/json": {"schema": refs[(endpoint.body, "validation")]}},
        }
    return operation


def _parameters(endpoint: Endpoint) -> list[dict[str, Any]]:
    found = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in _PARAMETER.findall(endpoint.path)
    ]
    if endpoint.query is not None:
        schema = endpoint.query.model_json_schema()
        for name, field in endpoint.query.model_fields.items():
            found.append(
                {
                    "name": name,
                    "in": "query",
                    "required": field.is_required(),
                    "schema": schema["properties"][name],
                }
            )
    return found


def _responses(
    endpoint: Endpoint, refs: dict[tuple[type[BaseModel], Mode], dict[str, Any]]
) -> dict[str, Any]:
    answer = (
        {"type": "object"} if endpoint.answer is None else refs[(endpoint.answer, "serialization")]
    )
    responses: dict[str, Any] = {str(endpoint.status): _response(endpoint.status, answer)}
    error = refs[(ErrorBody, "serialization")]
    for status in sorted(set(_errors(endpoint))):
        responses[str(status)] = _response(status, error)
    return responses


def _errors(endpoint: Endpoint) -> list[int]:
    statuses = [*endpoint.errors, 500]  # any request may meet a fault: still this shape
    if endpoint.role is not None:
        statuses += [401, 403, 429]
    if endpoint.body is not None:
        statuses += [400, 413, 415]
    if endpoint.query is not None:
        statuses.append(400)
    if "{name}" in endpoint.path:
        statuses += [400, 404]
    return statuses


def _response(status: int, schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": _STATUS_TEXT.get(status, "see the error's message"),
        "content": {"application/json": {"schema": schema}},
    }
