"""The dashboard's guards over HTTP: where a form may send the browser, and how many wrong
tokens one client address may send."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from aiormq.exceptions import AMQPConnectionError

from warren_cron.monitor import mount
from warren_cron.monitor.mount import Dashboard
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.monitor.status_keeper import StatusKeeper
from warren_cron.monitor.web.app import create_app
from warren_cron.monitor.web.dashboard import DASHBOARD
from warren_cron.monitor.web.throttle import LoginThrottle
from warren_cron.schedules.load import parse_schedules

TOKEN = "t0ken-for-guards"
#: Another client address: the whole of 127.0.0.0/8 is this host's loopback.
OTHER = "127.0.0.2"
#: Where a hostile ``back`` lands instead: the action's own page.
DEFAULT_BACK = "/failed"
HOSTILE_BACKS = [
    "//evil.example",
    "/\t/evil.example",
    "/\\evil.example",
    "\\/evil.example",
    "/\\/evil.example",
    "/\r\n/evil.example",
    "/\n/evil.example",
    "/ /evil.example",
    " //evil.example",
    " /x",
    "/\x00/evil.example",
    "https://evil.example",
    "javascript:alert(1)",
    "evil.example",
    "/\u3000/evil.example",
    "",
]
#: Paths of this site that stay as they are (percent-escapes are never decoded into a host).
SAFE_BACKS = ["/", "/failed?schedule=nightly&text=x", "/schedules?q=&page=2", "/%09/evil.example"]


@dataclass
class Clock:
    """A monotonic clock the test moves by hand."""

    now: float = 1000.0

    def __call__(self) -> float:
        """The time it was set to."""
        return self.now


@dataclass
class Served:
    """The dashboard's real web application on a real port, and its throttle's clock."""

    url: str
    dashboard: Dashboard
    clock: Clock


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    """The dashboard with a token and one schedule (its page carries a CSRF token)."""
    settings = MonitorSettings(namespace="guard-test", dashboard_token=TOKEN)
    schedules = parse_schedules('[[schedule]]\nname = "a"\nevery = "1h"\ntask = "t"\n', settings)
    dashboard = Dashboard(settings, schedules.schedules, StatusKeeper(settings), set)
    clock = Clock()
    dashboard.auth.throttle.clock = clock
    app = create_app(mount.ROUTES)
    app[DASHBOARD] = dashboard
    async with TestServer(app, host="127.0.0.1") as server:
        yield Served(str(server.make_url("/")), dashboard, clock)


def client(address: str = "127.0.0.1") -> aiohttp.ClientSession:
    """An HTTP client connecting from ``address``, following no redirect by itself."""
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(address, 0)))


async def log_in(http: aiohttp.ClientSession, url: str, token: str = TOKEN) -> int:
    """POST the login form; its status (303 with a session cookie on success)."""
    form = {"name": "alice", "token": token}
    async with http.post(url + "login", data=form, allow_redirects=False) as answer:
        return answer.status


def lands_on(url: str, location: str) -> str:
    """The host a browser goes to for ``location``: it drops tabs and line breaks, trims
    spaces and control characters, and reads a backslash as a slash."""
    cleaned = re.sub(r"[\t\r\n]", "", location).strip("".join(map(chr, range(33))))
    return urlsplit(urljoin(url, cleaned.replace("\\", "/"))).netloc


@pytest.mark.parametrize("back", HOSTILE_BACKS + SAFE_BACKS, ids=ascii)
async def test_an_actions_back_never_sends_the_browser_to_another_site(
    served: Served, back: str
) -> None:
    """A logged-in form's ``back`` is followed only when it is a path of this site; a
    hostile one (tab, line break, backslash, scheme, host) goes back to the action's page."""
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        assert await log_in(http, served.url) == 303
        async with http.get(served.url + "schedules") as page:
            match = re.search(r'name="csrf" value="([0-9a-f]+)"', await page.text())
        assert match is not None
        form = {"csrf": match.group(1), "why": "tidy up", "count": "0", "back": back}
        async with http.post(served.url + "failed/replay", data=form, allow_redirects=False) as a:
            assert a.status == 303
            location = a.headers["Location"]
    assert lands_on(served.url, location) == urlsplit(served.url).netloc
    assert location == (back if back in SAFE_BACKS else DEFAULT_BACK)


async def test_a_burst_of_wrong_logins_locks_out_that_address_and_no_other(
    served: Served,
) -> None:
    """Five wrong tokens in a minute from one address: its next tries get 429 with
    Retry-After, the right token too (a login or a bearer action); another address logs in;
    a minute later the first may log in again."""
    async with client() as attacker, client(OTHER) as neighbour:
        statuses = await asyncio.gather(
            *(log_in(attacker, served.url, f"guess-{n}") for n in range(50))
        )
        assert sorted(statuses) == [403] * 5 + [429] * 45
        form = {"name": "alice", "token": TOKEN}
        async with attacker.post(served.url + "login", data=form, allow_redirects=False) as a:
            assert (a.status, a.headers["Retry-After"]) == (429, "60")
            assert "warren_session" not in a.cookies
            assert "too many wrong tokens" in await a.text()
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with attacker.post(served.url + "failed/purge", headers=bearer) as action:
            assert action.status == 429 and action.headers["Retry-After"] == "60"
        assert await log_in(neighbour, served.url) == 303
        served.clock.now += 59.5
        assert await log_in(attacker, served.url) == 429
        served.clock.now += 0.5
        assert await log_in(attacker, served.url) == 303


async def test_a_right_token_clears_the_count_of_wrong_ones(served: Served) -> None:
    """Four wrong, one right, four wrong: never locked out; the fifth in a row is counted."""
    async with client() as user:
        for _ in range(2):
            assert [await log_in(user, served.url, "typo") for _ in range(4)] == [403] * 4
            assert await log_in(user, served.url) == 303
        assert [await log_in(user, served.url, "typo") for _ in range(6)] == [403] * 5 + [429]


async def test_wrong_tokens_spread_over_more_than_the_window_lock_nothing(served: Served) -> None:
    """A wrong token every 15 s is a person typing, not a guesser: only those within the
    last minute count."""
    async with client() as user:
        for _ in range(10):
            assert await log_in(user, served.url, "typo") == 403
            served.clock.now += 15


def test_addresses_beyond_the_tables_size_push_out_the_least_recently_seen() -> None:
    """An attacker rotating addresses grows the table to its size and no further; the
    newest lockouts are kept."""
    clock = Clock()
    throttle = LoginThrottle(failures=1, seconds=60, clients=100, clock=clock)
    for n in range(10_000):
        throttle.failed(f"10.0.{n // 256}.{n % 256}")
    assert len(throttle) == 100
    assert throttle.wait("10.0.39.15") == 60  # the last one
    assert throttle.wait("10.0.0.0") == 0  # forgotten


async def test_a_page_read_while_the_broker_is_unreachable_is_a_503_that_says_so() -> None:
    """A page whose broker read fails answers 503 with Retry-After and says why, not a 500
    with a traceback; the security headers stay."""

    async def unreachable(_request: web.Request) -> web.Response:
        raise AMQPConnectionError("connection reset")

    def routes(app: web.Application) -> None:
        app.router.add_get("/runs/x", unreachable)

    app = create_app([routes])
    async with TestServer(app) as server, aiohttp.ClientSession() as session:
        answer = await session.get(str(server.make_url("/runs/x")))
        assert answer.status == 503
        assert answer.headers["Retry-After"] == "5"
        assert answer.headers["X-Frame-Options"] == "DENY"
        assert "broker could not be reached" in await answer.text()
