"""The API's errors: one JSON shape, ``{"error": {"code", "message", ...}}``, for every refusal.

Handlers raise ``ApiError``; the middleware turns it, the store's refusals, aiohttp's own
errors on ``/api/`` paths (an unknown path, a method not allowed) and any error nobody
foresaw (a 500, logged) into that shape, so a client never has to read an HTML or plain-text
error page.
"""

from __future__ import annotations

from collections.abc import Mapping
from traceback import extract_tb
from typing import Any

import structlog
from aiohttp import web

from warren_cron.errors import (
    BROKER_TROUBLE,
    InvalidSchedule,
    NameTaken,
    ScheduleNotFound,
    StoreError,
    VersionConflict,
)
from warren_cron.monitor.web.app import Handler

log = structlog.get_logger("api")
PREFIX = "/api/"
#: aiohttp's own errors, by status, as codes.
_CODES = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}


#: Sent with a 503: the robust connection tries again every second, a few are enough.
RETRY_LATER = {"Retry-After": "5"}


class ApiError(Exception):
    """A refusal: HTTP ``status``, a ``code`` for machines, a ``message`` saying what to fix."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers, self.extra = dict(headers or {}), extra

    def response(self) -> web.Response:
        """The error as its JSON answer."""
        body = {"error": {"code": self.code, "message": self.message, **self.extra}}
        return web.json_response(body, status=self.status, headers=self.headers)


def store_error(error: StoreError) -> ApiError:
    """A refusal of the schedule store as the API answers it."""
    if isinstance(error, VersionConflict):
        return ApiError(
            409, "version_conflict", str(error), expected=error.expected, current=error.current
        )
    if isinstance(error, InvalidSchedule):
        return ApiError(400, "invalid", str(error), problems=error.problems)
    if isinstance(error, ScheduleNotFound):
        return ApiError(404, "not_found", str(error))
    if isinstance(error, NameTaken):
        return ApiError(409, "name_taken", str(error))
    return ApiError(503, "store_unavailable", str(error))


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error of an ``/api/`` path as JSON; other paths pass through untouched."""
    if not request.path.startswith(PREFIX):
        return await handler(request)
    try:
        return await handler(request)
    except ApiError as error:
        return error.response()
    except StoreError as error:
        return store_error(error).response()
    except BROKER_TROUBLE as error:
        log.warning("api call failed on the broker", path=request.path, error=repr(error))
        why = "the broker could not be reached or refused the operation: try again"
        return ApiError(503, "broker_unavailable", why, headers=RETRY_LATER).response()
    except web.HTTPException as error:
        if error.status < 400:
            raise
        code = _CODES.get(error.status, "http_error")
        message = f"{request.method} {request.path}: {error.reason}; GET /api/v1/openapi.json"
        return ApiError(error.status, code, message, headers=_kept(error)).response()
    except Exception as error:  # the catch-all: a client always gets JSON
        return _internal(request, error).response()


def _internal(request: web.Request, error: Exception) -> ApiError:
    """A 500 for an error nobody foresaw: logged with where it was raised, logged and
    answered with its type only (its text may hold what a request sent, a secret even)."""
    kind = type(error).__name__
    frames = [f"{f.filename}:{f.lineno} {f.name}" for f in extract_tb(error.__traceback__)]
    log.error("api call failed", method=request.method, path=request.path, error=kind, at=frames)
    why = f"the monitor failed on this request ({kind}); it is logged: report it with the time"
    return ApiError(500, "internal", why)


def _kept(error: web.HTTPException) -> dict[str, str]:
    return {k: v for k, v in error.headers.items() if k in ("Allow", "Retry-After")}
