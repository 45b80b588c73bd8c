"""The dashboard's web application: routes of each page, static files, security headers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import structlog
from aiohttp import web
from aiohttp.typedefs import Middleware

from warren_cron.errors import BROKER_TROUBLE

log = structlog.get_logger("dashboard")
#: Resolved: an editable install links each file into a tree of its own, and the static
#: route serves no link (it would leave the folder), so the pages came unstyled there.
STATIC = Path(__file__).resolve().parent / "static"
#: No inline script or style, nothing from elsewhere, never inside another site's frame.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
#: What a page answers while the broker cannot be reached.
OUTAGE = "The broker could not be reached, and this page is read from it: reload in a moment."
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: Each page module's ``add_routes``.
Routes = Callable[[web.Application], None]


@web.middleware
async def secured(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Security headers on every answer; pages are never cached (they show live state)."""
    try:
        response = await handler(request)
    except web.HTTPException as error:  # redirects and errors: raised, with the headers too
        _secure(request, error)
        raise
    _secure(request, response)
    return response


@web.middleware
async def broker_outage(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A page read from the broker while it cannot be reached: a 503 that says so, not a 500."""
    try:
        return await handler(request)
    except BROKER_TROUBLE as error:
        log.warning("page failed on the broker", path=request.path, error=repr(error))
        raise web.HTTPServiceUnavailable(text=OUTAGE, headers={"Retry-After": "5"}) from None


def _secure(request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(SECURITY_HEADERS)
    if not request.path.startswith("/static/"):
        response.headers["Cache-Control"] = "no-store"


def create_app(routes: list[Routes], guards: Sequence[Middleware] = ()) -> web.Application:
    """The application with every page's routes and the static files; ``guards`` run after
    the security headers are promised and before a page reads the broker."""
    app = web.Application(middlewares=[secured, *guards, broker_outage])
    for add in routes:
        add(app)
    app.router.add_static("/static/", STATIC)
    return app
