"""Log in with a token (a session cookie), log out, and send readers without one to log in."""

from __future__ import annotations

from urllib.parse import urlencode

from aiohttp import web

from warren_cron.monitor.dashboard.pages.common import local, log
from warren_cron.monitor.web.app import Handler
from warren_cron.monitor.web.auth import COOKIE, Refused, same_site
from warren_cron.monitor.web.dashboard import dashboard_of

#: Paths anyone reaches: the login itself, the page's static files, and the HTTP API, which
#: asks for its bearer token on each call.
PUBLIC = ("/login", "/logout")
PUBLIC_UNDER = ("/static/", "/api/")


@web.middleware
async def readers_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A page read without the role the policy asks (with tokens set: a login) goes to the
    login page, which brings the reader back after. Every form (a POST) is an action that
    asks who sends it itself: checked here too, a wrong bearer token would count twice."""
    path = request.path
    if request.method not in ("GET", "HEAD") or path in PUBLIC or path.startswith(PUBLIC_UNDER):
        return await handler(request)
    dashboard = dashboard_of(request)
    try:
        role = dashboard.auth.reader(request)
    except Refused as refused:
        return dashboard.refusal(request, "refused.html", refused, why=refused.why, back="/")
    if role is None:
        raise web.HTTPSeeOther("/login?" + urlencode({"next": request.path_qs}))
    return await handler(request)


async def login_form(request: web.Request) -> web.StreamResponse:
    """The login form; ``next`` is the page to go back to."""
    back = local(request.query.get("next"), "/")
    return dashboard_of(request).page(request, "login.html", error=None, back=back)


async def login(request: web.Request) -> web.StreamResponse:
    """Check the token; a right one opens a session and goes back to the page asked for."""
    dashboard, form = dashboard_of(request), await request.post()
    name, token = str(form.get("name", "")), str(form.get("token", ""))
    back = local(str(form.get("next", "/")), "/")
    try:
        same_site(request)
        session = dashboard.auth.login(name, token, request.remote or "?")
    except Refused as refused:
        log.warning("dashboard login refused", remote=request.remote, why=refused.why)
        return dashboard.refusal(request, "login.html", refused, error=refused.why, back=back)
    if session is None:
        log.warning("dashboard login refused", remote=request.remote, why="wrong token")
        error = "read-only: no token is set" if dashboard.auth.read_only else "wrong token"
        return dashboard.page(request, "login.html", status=403, error=error, back=back)
    log.info("dashboard login", user=name, remote=request.remote)
    answer = web.HTTPSeeOther(back)
    answer.set_cookie(
        COOKIE,
        session,
        httponly=True,
        samesite="Strict",
        path="/",
        secure=served_over_https(request),
        max_age=int(dashboard.auth.session_seconds),
    )
    raise answer


def served_over_https(request: web.Request) -> bool:
    """Whether the browser reached the dashboard over https: itself, or a TLS proxy that
    says so (the cookie is then never sent in clear; a false claim only makes it stricter)."""
    return request.secure or request.headers.get("X-Forwarded-Proto", "") == "https"


async def logout(request: web.Request) -> web.StreamResponse:
    """Forget the session."""
    same_site(request)
    dashboard_of(request).auth.logout(request)
    answer = web.HTTPSeeOther("/login")
    answer.del_cookie(COOKIE, path="/")
    raise answer


def add_routes(app: web.Application) -> None:
    """``/login`` and ``/logout``."""
    app.router.add_get("/login", login_form)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
