"""Log in with the dashboard token (a session cookie), and log out."""

from __future__ import annotations

from aiohttp import web

from warren_cron.monitor.dashboard.auth import COOKIE, Refused, same_site
from warren_cron.monitor.dashboard.pages.common import dashboard_of, log


async def login_form(request: web.Request) -> web.StreamResponse:
    """The login form."""
    return dashboard_of(request).page(request, "login.html", error=None)


async def login(request: web.Request) -> web.StreamResponse:
    """Check the token; a right one opens a session and goes to the overview."""
    dashboard, form = dashboard_of(request), await request.post()
    name, token = str(form.get("name", "")), str(form.get("token", ""))
    try:
        same_site(request)
        session = dashboard.auth.login(name, token, request.remote or "?")
    except Refused as refused:
        log.warning("dashboard login refused", remote=request.remote, why=refused.why)
        return dashboard.refusal(request, "login.html", refused, error=refused.why)
    if session is None:
        log.warning("dashboard login refused", remote=request.remote, why="wrong token")
        error = "read-only: no token is set" if dashboard.auth.read_only else "wrong token"
        return dashboard.page(request, "login.html", status=403, error=error)
    log.info("dashboard login", user=name, remote=request.remote)
    answer = web.HTTPSeeOther("/")
    answer.set_cookie(COOKIE, session, httponly=True, samesite="Strict", path="/")
    raise answer


async def logout(request: web.Request) -> web.StreamResponse:
    """Forget the session."""
    same_site(request)
    dashboard_of(request).auth.logout(request)
    answer = web.HTTPSeeOther("/")
    answer.del_cookie(COOKIE, path="/")
    raise answer


def add_routes(app: web.Application) -> None:
    """``/login`` and ``/logout``."""
    app.router.add_get("/login", login_form)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
