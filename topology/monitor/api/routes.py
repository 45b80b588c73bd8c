"""The API's route table: each endpoint once, with its role, body, query and answer models.

``add_endpoints`` serves the table; ``openapi.py`` describes the same table. Every request
goes the same way: token (401, or 429 while its address is locked out), role (403), path
name (400), query (400), body (415, 413, 400), then the handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
from aiohttp import web
from pydantic import BaseModel, ValidationError

from warren_cron.errors import validation_problems
from warren_cron.monitor.api.problems import ApiError
from warren_cron.monitor.api_tokens import Caller
from warren_cron.monitor.roles import Action, Role, needs
from warren_cron.monitor.web.auth import Refused
from warren_cron.monitor.web.dashboard import dashboard_of
from warren_cron.schedules.spec import check_name

if TYPE_CHECKING:
    from warren_cron.monitor.web.dashboard import WebDashboard

BASE = "/api/v1"
#: The largest body read: four times the largest schedule (64 KiB as JSON), for its fields'
#: escapes and the reason around it.
MAX_BODY = 256 * 1024
M = TypeVar("M", bound=BaseModel)
Answer = BaseModel | dict[str, Any]


@dataclass(frozen=True, slots=True)
class Call:
    """One request that passed the guards: who sent it, the path's name, query and body."""

    request: web.Request
    caller: Caller | None
    name: str
    query: BaseModel | None
    body: BaseModel | None

    @property
    def dashboard(self) -> WebDashboard:
        """The dashboard (and monitor state) serving the API."""
        return dashboard_of(self.request)

    @property
    def by(self) -> str:
        """How history names the caller: its token's name."""
        assert self.caller is not None, "an anonymous endpoint writes nothing"
        return self.caller.name

    def body_as(self, model: type[M]) -> M:
        """The body, as the endpoint's model."""
        assert isinstance(self.body, model)
        return self.body

    def query_as(self, model: type[M]) -> M:
        """The query, as the endpoint's model."""
        assert isinstance(self.query, model)
        return self.query


Handler = Callable[[Call], Awaitable[Answer]]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One method and path of the API; the handler's docstring is its summary."""

    method: str
    path: str
    handler: Handler
    #: What it does, whose role the one table of ``roles.py`` gives; None: no token needed.
    action: Action | None
    answer: type[BaseModel] | None
    body: type[BaseModel] | None = None
    #: False: an absent body is the body model's defaults.
    body_required: bool = True
    query: type[BaseModel] | None = None
    status: int = 200
    #: Statuses beyond the guards' own (409 ...).
    errors: tuple[int, ...] = ()

    @property
    def role(self) -> Role | None:
        """The role it needs, as the dashboard's same action does; None: no token needed."""
        return None if self.action is None else needs(self.action)

    @property
    def summary(self) -> str:
        """The first line of the handler's docstring."""
        return (self.handler.__doc__ or "").strip().splitlines()[0]


def add_endpoints(app: web.Application, endpoints: Sequence[Endpoint]) -> None:
    """Serve each endpoint under ``BASE``."""
    for endpoint in endpoints:
        app.router.add_route(endpoint.method, BASE + endpoint.path, _served(endpoint))


def _served(endpoint: Endpoint) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def serve(request: web.Request) -> web.StreamResponse:
        caller = _authorized(request, endpoint.action)
        name = _name(request)
        query = (
            None
            if endpoint.query is None
            else _parsed(endpoint.query, dict(request.query), "query")
        )
        body = None if endpoint.body is None else await _body(request, endpoint)
        answer = await endpoint.handler(Call(request, caller, name, query, body))
        data = answer.model_dump(mode="json") if isinstance(answer, BaseModel) else answer
        return web.Response(
            body=orjson.dumps(data), status=endpoint.status, content_type="application/json"
        )

    return serve


def _authorized(request: web.Request, action: Action | None) -> Caller | None:
    if action is None:
        return None
    caller = _caller(request)
    # The API never reads anonymously: the dashboard's anonymous reading opens pages only.
    if not dashboard_of(request).auth.access.may(caller.role, action):
        role = needs(action)
        raise ApiError(
            403, "forbidden", f"token {caller.name!r} has role {caller.role}; this needs {role}"
        )
    return caller


def _caller(request: web.Request) -> Caller:
    dashboard = dashboard_of(request)
    header = request.headers.get("Authorization", "")
    challenge = {"WWW-Authenticate": 'Bearer realm="warren"'}
    if not dashboard.api.tokens:
        why = "the API has no tokens: set CRON_API_TOKENS on the monitor"
        raise ApiError(401, "unauthorized", why, challenge)
    if not header.startswith("Bearer "):
        why = "send Authorization: Bearer <token> (a token of CRON_API_TOKENS)"
        raise ApiError(401, "unauthorized", why, challenge)
    given = header.removeprefix("Bearer ")
    try:
        caller = dashboard.auth.checked(request.remote or "?", lambda: dashboard.api.match(given))
    except Refused as refused:
        raise ApiError(429, "throttled", refused.why, refused.headers) from None
    if caller is None:
        raise ApiError(401, "unauthorized", "wrong bearer token", challenge)
    return caller


def _name(request: web.Request) -> str:
    name = request.match_info.get("name", "")
    if "name" in request.match_info:
        try:
            check_name(name)
        except ValueError as error:
            raise ApiError(400, "invalid", f"name: {error}") from None
    return name


async def _body(request: web.Request, endpoint: Endpoint) -> BaseModel:
    assert endpoint.body is not None
    if not request.body_exists and not endpoint.body_required:
        return endpoint.body()
    if request.content_type != "application/json":
        why = (
            f"send the body as JSON with Content-Type: application/json, not {request.content_type}"
        )
        raise ApiError(415, "unsupported_media_type", why)
    return _parsed(endpoint.body, _json(await _read(request)), "body")


async def _read(request: web.Request) -> bytes:
    if (request.content_length or 0) > MAX_BODY:
        raise _too_large()
    data = bytearray()
    async for chunk in request.content.iter_any():
        data += chunk
        if len(data) > MAX_BODY:
            raise _too_large()
    return bytes(data)


def _too_large() -> ApiError:
    why = f"the body is over {MAX_BODY} bytes: a schedule is at most 64 KiB as JSON"
    return ApiError(413, "too_large", why, limit=MAX_BODY)


def _json(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise ApiError(400, "malformed_json", f"the body is not JSON: {error}") from None


def _parsed(model: type[M], data: Any, whole: str) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as error:
        problems = validation_problems(error, whole=whole)
        raise ApiError(400, "invalid", "; ".join(problems), problems=problems) from None
