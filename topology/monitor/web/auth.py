"""Who reads and acts on the dashboard, and proof that a form was sent from the dashboard itself.

What each role may do is decided in ``warren_cron.ops.access``; this module finds the role
of who sends a request. With any token configured, reading the pages needs one too (unless
``CRON_DASHBOARD_ANONYMOUS_READ`` opens them to a viewer's rights): a login (the form sets
an HttpOnly, SameSite=Strict session cookie, Secure over https, kept only in memory, that
lasts CRON_DASHBOARD_SESSION_SECONDS) or ``Authorization: Bearer <token>`` on the request.
A token has a role, as the HTTP API's do: ``CRON_DASHBOARD_TOKEN`` is an operator's, and a
token of ``CRON_API_TOKENS`` carries its own role and name. Each action needs the role the
one table gives it, on the API too: an operator triggers, pauses, resumes, cancels and
replays; purging and creating, editing or archiving runtime schedules need ``admin``. A form
sent with the cookie must also carry the session's CSRF token and, when the browser says
where it comes from (``Origin``, ``Sec-Fetch-Site``), come from this very site. Without any
token configured the pages are open and read-only: every action is refused. Wrong tokens
are counted per client address and lock it out for a while (``throttle.py``).
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urlsplit

from aiohttp import web

from warren_cron.monitor.api_tokens import Caller
from warren_cron.monitor.web.throttle import LoginThrottle
from warren_cron.ops.access import Access, Action, Role, needs

COOKIE = "warren_session"
#: Sessions kept at once; the oldest is forgotten first (its user logs in again).
MAX_SESSIONS = 1000
#: How long a login lasts when not told (CRON_DASHBOARD_SESSION_SECONDS).
SESSION_SECONDS = 43_200.0
T = TypeVar("T")
READ_ONLY = "the dashboard is read-only: set CRON_DASHBOARD_TOKEN on the monitor to allow actions"
#: The role of ``CRON_DASHBOARD_TOKEN``: the actions the dashboard had before roles.
DASHBOARD_ROLE: Role = "operator"
#: Finds the API token's caller (``ApiState.match``).
Matcher = Callable[[str], Caller | None]


class Refused(Exception):
    """An action refused; ``why`` is shown to the user, with HTTP ``status`` and ``headers``."""

    def __init__(
        self, why: str, status: int = 403, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(why)
        self.why, self.status, self.headers = why, status, dict(headers or {})


@dataclass(frozen=True, slots=True)
class Actor:
    """Who acts: the name given at login (``api`` for a bearer token; an API token's name),
    their address and their role."""

    name: str
    remote: str
    role: Role = DASHBOARD_ROLE

    @property
    def by(self) -> str:
        """How history and logs name them: ``alice@dashboard (127.0.0.1)``."""
        return f"{self.name}@dashboard ({self.remote})"


class Auth:
    """Sessions of logged-in users, in memory: a restarted monitor asks them to log in again."""

    def __init__(
        self,
        token: str | None,
        throttle: LoginThrottle,
        api: Matcher | None = None,
        anonymous_read: bool = False,
        session_seconds: float = SESSION_SECONDS,
    ) -> None:
        self.token = token
        self.throttle = throttle
        self._api = api
        self.access = Access(
            tokens=token is not None or api is not None, anonymous_read=anonymous_read
        )
        self.session_seconds = session_seconds
        self._key = secrets.token_bytes(32)
        #: Each session id (random, kept only here) and its user and monotonic end.
        self._sessions: dict[str, tuple[Caller, float]] = {}

    @property
    def read_only(self) -> bool:
        """True when no token is configured: no action is possible."""
        return self.token is None and self._api is None

    def _caller(self, given: str, address: str, name: str) -> Caller | None:
        """Whose token ``given`` is (see ``checked``): the dashboard token's, as ``name``
        with its role, or an API token's, as that token's name and role."""
        token = self.token

        def right() -> Caller | None:
            if token is not None and hmac.compare_digest(given.encode(), token.encode()):
                return Caller(name, DASHBOARD_ROLE)
            return None if self._api is None else self._api(given)

        return self.checked(address, right)

    def checked(self, address: str, check: Callable[[], T | None]) -> T | None:
        """What ``check`` finds for a token sent by ``address`` (None: a wrong one, counted);
        ``Refused`` (429) while ``address`` is locked out for wrong ones, whatever it sends."""
        wait = math.ceil(self.throttle.wait(address))
        if wait > 0:
            why = f"too many wrong tokens from {address}: try again in {wait} s"
            raise Refused(why, status=429, headers={"Retry-After": str(wait)})
        found = check()
        (self.throttle.failed if found is None else self.throttle.succeeded)(address)
        return found

    def login(self, name: str, token: str, address: str) -> str | None:
        """A new session id for ``name`` when ``token`` is right; None otherwise."""
        caller = None
        if not self.read_only:
            caller = self._caller(token, address, name.strip()[:40] or "someone")
        if caller is None:
            return None
        session = secrets.token_urlsafe(32)
        self._sessions[session] = (caller, time.monotonic() + self.session_seconds)
        if len(self._sessions) > MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]
        return session

    def logout(self, request: web.Request) -> None:
        """Forget the request's session."""
        self._sessions.pop(request.cookies.get(COOKIE, ""), None)

    def user(self, request: web.Request) -> str | None:
        """The logged-in user of the request's session cookie, if any."""
        caller = self.session(request)
        return None if caller is None else caller.name

    def session(self, request: web.Request) -> Caller | None:
        """The logged-in user of the request's session cookie, and their role; None for no
        cookie, an unknown one (forged, or from before a restart) or an expired one."""
        cookie = request.cookies.get(COOKIE, "")
        caller, ends = self._sessions.get(cookie, (None, 0.0))
        if caller is not None and ends <= time.monotonic():
            del self._sessions[cookie]
            return None
        return caller

    def reader(self, request: web.Request) -> Role | None:
        """The role this request reads the pages with (its session's, its bearer token's, or
        what the policy gives anyone); None: it must log in first."""
        caller = self.session(request)
        bearer = request.headers.get("Authorization", "")
        if caller is None and bearer.startswith("Bearer ") and not self.read_only:
            caller = self._caller(bearer.removeprefix("Bearer "), request.remote or "?", "api")
        return self.access.pages_role(None if caller is None else caller.role)

    def may(self, request: web.Request, action: Action) -> bool:
        """Whether the request's session may do ``action``: the page shows its button."""
        caller = self.session(request)
        return self.access.may(None if caller is None else caller.role, action)

    def csrf(self, request: web.Request) -> str:
        """The CSRF token of the request's session (empty without one)."""
        session = request.cookies.get(COOKIE, "")
        if self.session(request) is None:
            return ""
        return hmac.new(self._key, session.encode(), hashlib.sha256).hexdigest()

    def actor(self, request: web.Request, form: Mapping[str, str], action: Action) -> Actor:
        """Who sends this action, when their role includes the one ``action`` needs; else
        ``Refused`` saying why it may not be done."""
        actor, role = self._sender(request, form), needs(action)
        if not self.access.may(actor.role, action):
            raise Refused(
                f"{actor.name} is logged in with role {actor.role}; this needs {role}: log in "
                f"with a token of that role"
            )
        return actor

    def _sender(self, request: web.Request, form: Mapping[str, str]) -> Actor:
        remote = request.remote or "?"
        if self.read_only:
            raise Refused(READ_ONLY)
        bearer = request.headers.get("Authorization", "")
        if bearer.startswith("Bearer "):
            caller = self._caller(bearer.removeprefix("Bearer "), remote, "api")
            if caller is None:
                raise Refused("wrong bearer token")
            return Actor(caller.name, remote, caller.role)
        same_site(request)
        user = self.session(request)
        if user is None:
            raise Refused("log in with a token first (Log in, top right)")
        if not hmac.compare_digest(str(form.get("csrf", "")), self.csrf(request)):
            raise Refused("the form is out of date or not from this dashboard: reload the page")
        return Actor(user.name, remote, user.role)


def same_site(request: web.Request) -> None:
    """Refuse a form that the browser says another site sent."""
    if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
        raise Refused("a form from another site is refused")
    origin = request.headers.get("Origin")
    # The host alone: behind a TLS proxy the scheme differs from what the monitor sees.
    if origin is not None and urlsplit(origin).netloc != request.host:
        raise Refused(f"a form from {origin} is refused: open the dashboard at its own address")
