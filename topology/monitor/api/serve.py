"""The API's routes on the dashboard's application: every endpoint of the table, the OpenAPI
document, and JSON errors under ``/api/``."""

from __future__ import annotations

from functools import cache
from typing import Any

from aiohttp import web

from warren_cron.monitor.api import cancels, failed, runs, schedules
from warren_cron.monitor.api.openapi import document, with_tasks
from warren_cron.monitor.api.problems import json_errors
from warren_cron.monitor.api.routes import Call, Endpoint, add_endpoints


async def openapi(call: Call) -> dict[str, Any]:
    """This document: every endpoint, its role, body, answer and errors, and the tasks the
    live workers registered, with their payloads' schemas."""
    return with_tasks(_document(), call.dashboard.api.known_tasks.known.live())


#: Every endpoint of the API; a new group of endpoints adds its table here.
ENDPOINTS: list[Endpoint] = [
    Endpoint("GET", "/openapi.json", openapi, None, None),
    *schedules.ENDPOINTS,
    *runs.ENDPOINTS,
    *cancels.ENDPOINTS,
    *failed.ENDPOINTS,
]


@cache
def _document() -> dict[str, Any]:
    return document(ENDPOINTS)


def add_routes(app: web.Application) -> None:
    """The API's endpoints, and its errors as JSON."""
    app.middlewares.append(json_errors)
    add_endpoints(app, ENDPOINTS)
