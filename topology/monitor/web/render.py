"""Pages from Jinja templates, escaped: whatever a page shows is text, never HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from aiohttp import web

from warren_cron.clock import utcnow
from warren_cron.monitor.console import views
from warren_cron.monitor.web.auth import COOKIE, Auth

TEMPLATES = Path(__file__).parent / "templates"
NAV = (
    ("/", "Overview"),
    ("/schedules", "Schedules"),
    ("/runs", "Runs"),
    ("/failed", "Failed"),
    ("/flow", "Flow"),
)


def environment() -> jinja2.Environment:
    """The templates, with autoescaping on for every one of them."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(stamp=views.stamp, ago=views.ago, age=views.age, nav=NAV)
    return env


class Notes:
    """One message per session for the page after an action (``paused nightly``)."""

    def __init__(self) -> None:
        self._notes: dict[str, str] = {}

    def leave(self, request: web.Request, text: str) -> None:
        """Keep ``text`` for the session's next page."""
        session = request.cookies.get(COOKIE)
        if session:
            self._notes[session] = text

    def take(self, request: web.Request) -> str | None:
        """The note left for this session, once."""
        return self._notes.pop(request.cookies.get(COOKIE, ""), None)


def render(
    request: web.Request,
    env: jinja2.Environment,
    auth: Auth,
    notes: Notes,
    name: str,
    status: int = 200,
    **context: Any,
) -> web.Response:
    """The page ``name`` with ``context`` and what every page shows (user, note, CSRF)."""
    session = auth.session(request)
    page = env.get_template(name).render(
        path=request.path,
        now=utcnow(),
        read_only=auth.read_only,
        user=None if session is None else session.name,
        role=None if session is None else session.role,
        may=lambda action: auth.may(request, action),
        csrf=auth.csrf(request),
        note=notes.take(request),
        **context,
    )
    return web.Response(text=page, status=status, content_type="text/html")
