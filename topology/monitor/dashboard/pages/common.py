"""What every page handler shares: the dashboard it serves, and how an action is done."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import urlsplit

import structlog
from aiohttp import web
from yarl import URL

from warren_cron.monitor.roles import Action
from warren_cron.monitor.web.auth import Actor, Refused
from warren_cron.monitor.web.dashboard import dashboard_of

log = structlog.get_logger("dashboard")
#: Longest reason kept: it goes into history events and logs.
REASON_CHARS = 300
#: Does an action for an actor with the form's fields; returns what to tell them.
Perform = Callable[[Actor, Mapping[str, str], str], Awaitable[str]]
#: A path of this site: one ``/`` then printable ASCII without space or backslash. Browsers
#: drop tabs and line breaks from a URL and read ``\`` as ``/``, so ``/<tab>/evil`` would
#: leave the site: such characters are refused here, never stripped.
_ON_SITE = re.compile(r"/(?!/)[!-\[\]-~]*")


def reason_of(form: Mapping[str, str]) -> str:
    """The form's ``why`` (``reason`` is a filter of the failed queue): every action says
    why, for the history."""
    reason = " ".join(str(form.get("why", "")).split())[:REASON_CHARS]
    if not reason:
        raise Refused("say why: it goes into the run history")
    return reason


async def act(
    request: web.Request, action: Action, perform: Perform, back: str
) -> web.StreamResponse:
    """Check that who sends the form has the role ``action`` needs (the API's too) and why,
    do it, log it, and go back to ``back``."""
    dashboard = dashboard_of(request)
    form = {key: str(value) for key, value in (await request.post()).items()}
    try:
        actor = dashboard.auth.actor(request, form, action)
        reason = reason_of(form)
    except Refused as refused:
        log.warning("dashboard action refused", action=action, why=refused.why)
        return dashboard.refusal(request, "refused.html", refused, why=refused.why, back=back)
    message = await perform(actor, form, reason)
    log.info("dashboard action", action=action, by=actor.by, reason=reason, result=message)
    if dashboard.auth.user(request) is None:  # a bearer token: a client, not a browser
        return web.Response(text=message + "\n")
    dashboard.notes.leave(request, message)
    raise web.HTTPSeeOther(local(form.get("back"), back))


def local(path: str | None, default: str) -> str:
    """``path`` when it is a path of this site (the page an action came from), else
    ``default``: a form never sends the browser elsewhere."""
    if path is None or not _ON_SITE.fullmatch(path):
        return default
    try:
        sent = str(URL(path))  # what aiohttp puts in the Location header
    except ValueError:
        return default
    parts = urlsplit(sent)
    if parts.scheme or parts.netloc or not _ON_SITE.fullmatch(sent):
        return default
    return path
