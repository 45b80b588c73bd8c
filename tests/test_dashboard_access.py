"""One policy for the pages and the API, on a real monitor and broker, in Chromium: with
tokens set every page needs a login (or the anonymous-read setting), a role sees only the
buttons it may use, and a session ends at log out and cannot be forged."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import aiohttp
import pytest
from aiohttp.test_utils import make_mocked_request
from playwright.async_api import Page
from structlog.testing import capture_logs

from tests.api import TOKENS, Api, bearer, served_api
from tests.dashboard import free_port
from tests.failed_records import put_failed
from tests.namespace import TestBroker
from warren_cron.faultkit.waits import eventually
from warren_cron.monitor.web.auth import COOKIE, Auth
from warren_cron.monitor.web.throttle import LoginThrottle

pytestmark = pytest.mark.broker
#: Buttons and links that change something: none is shown to a viewer.
WRITES = ("Pause", "Trigger now", "Resume", "Replay 1 matching…", "Purge 1 matching…")


class Site:
    """A monitor with a token of each role, a file schedule, a failed record and a run."""

    def __init__(self, api: Api, record: str, run: str) -> None:
        self.api, self.record, self.run = api, record, run
        assert api.monitor.dashboard is not None and api.monitor.dashboard.url is not None
        self.url = api.monitor.dashboard.url

    def pages(self) -> list[str]:
        """Every page of the dashboard, each with what it shows."""
        return [
            "",
            "schedules",
            "schedules/from-file/edit",
            "runs?schedule=from-file",
            "runs/" + quote(self.run, safe=""),
            "failed",
            "failed/record?run_id=" + quote(self.record, safe=""),
            "failed/confirm?action=replay&schedule=from-file",
            "flow",
        ]


Start = Callable[..., Awaitable[Site]]


@pytest.fixture
async def site(
    broker: TestBroker, run_monitor: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Start]:
    """``await site(**settings)``: the monitor, once the record is indexed and run fired."""
    async with AsyncExitStack() as stack:

        async def start(**settings: Any) -> Site:
            served = served_api(broker, run_monitor, tmp_path, monkeypatch, **settings)
            api = await stack.enter_async_context(served)
            [envelope] = await put_failed(broker, 1, schedule="from-file")
            index = api.monitor.dashboard.failed  # type: ignore[union-attr]
            await eventually(lambda: len(index.records) == 1, 20, what="the record indexed")
            path = "/schedules/from-file/trigger"
            status, fired = await api.call("POST", path, "operator", json={"reason": "go"})
            assert status == 200, fired
            return Site(api, envelope.run_id, fired["run_id"])

        yield start


async def log_in(page: Page, site: Site, role: str) -> None:
    """Log in through the form with the token of ``role``."""
    await page.goto(site.url + "login")
    await page.get_by_label("Token").fill(TOKENS[role])
    await page.get_by_role("button", name="Log in").click()
    await page.wait_for_url(site.url)


async def writes_shown(page: Page, site: Site) -> set[str]:
    """The write buttons and links the schedules and failed pages show."""
    shown = set()
    for path in ("schedules", "failed?schedule=from-file"):
        await page.goto(site.url + path)
        await page.locator("main table").first.wait_for()
        for name in WRITES:
            # Hidden too: a schedule's buttons wait folded in its row's "act".
            button = page.get_by_role("button", name=name, exact=True, include_hidden=True)
            if await button.count() + await page.get_by_role("link", name=name).count():
                shown.add(name)
    return shown


async def test_with_tokens_set_every_page_sends_an_anonymous_reader_to_log_in_and_back(
    site: Start, page: Page
) -> None:
    """No page shows anything to a reader without a token: each goes to the login page
    (static files and the API's own 401 stay as they were); logging in there brings the
    reader back to the record asked for."""
    served = await site()
    for path in served.pages():
        await page.goto(served.url + path)
        assert page.url.startswith(served.url + "login?next="), (path, page.url)
        html = await page.content()
        assert served.record not in html and served.run not in html, path
    async with aiohttp.ClientSession() as http:
        static = served.url + "static/dashboard.css"
        async with http.get(static, allow_redirects=False) as public:
            # Not sent to log in, and served also from an editable install (links).
            assert public.status == 200 and "text/css" in public.headers["Content-Type"]
        async with http.get(served.url + "failed", allow_redirects=False) as moved:
            assert (moved.status, moved.headers["Location"]) == (303, "/login?next=/failed")
    assert (await served.api.call("GET", "/failed", None))[0] == 401
    await page.goto(served.url + served.pages()[6])
    await page.get_by_label("Token").fill(TOKENS["viewer"])
    await page.get_by_role("button", name="Log in").click()
    await page.get_by_text(served.record).first.wait_for()
    assert unquote(page.url) == unquote(served.url + served.pages()[6])


async def test_anonymous_reading_opens_every_page_with_a_viewers_rights_and_no_more(
    site: Start, page: Page
) -> None:
    """CRON_DASHBOARD_ANONYMOUS_READ: every page reads without a login, with no write
    button; a form sent anonymously is refused and the API still wants its token."""
    served = await site(dashboard_anonymous_read=True)
    for path in served.pages():
        answer = await page.goto(served.url + path)
        assert answer is not None and answer.status == 200, path
        assert unquote(page.url) == unquote(served.url + path), path
    assert await writes_shown(page, served) == set()
    form: dict[str, str | float | bool] = {"why": "anonymous try"}
    refused = await page.request.post(served.url + "schedules/from-file/pause", form=form)
    assert refused.status == 403 and "log in" in await refused.text()
    assert (await served.api.call("GET", "/failed", None))[0] == 401


async def test_a_viewer_reads_without_write_buttons_and_an_operator_sees_pause_and_replay(
    site: Start, page: Page
) -> None:
    """A viewer's login (its name and role in the header) reads every page, shows no button
    that changes anything, and its form (with the session's CSRF token) is refused for its
    role; an operator sees pause, trigger and replay, and no purge, which needs an admin."""
    served = await site()
    await log_in(page, served, "viewer")
    await page.locator("header .who").get_by_text("grafana · viewer").wait_for()
    for path in served.pages():
        answer = await page.goto(served.url + path)
        assert answer is not None and answer.status == 200, path
        assert unquote(page.url) == unquote(served.url + path), path
    assert await writes_shown(page, served) == set()
    [cookie] = [c for c in await page.context.cookies() if c["name"] == COOKIE]
    mocked = make_mocked_request("GET", "/", headers={"Cookie": f"{COOKIE}={cookie['value']}"})
    csrf = served.api.monitor.dashboard.auth.csrf(mocked)  # type: ignore[union-attr]
    form = {"why": "viewer try", "csrf": csrf}
    refused = await page.request.post(served.url + "schedules/from-file/pause", form=form)
    assert refused.status == 403 and "this needs operator" in await refused.text()
    async with aiohttp.ClientSession() as http:
        pause = served.url + "schedules/from-file/pause"
        async with http.post(pause, data=form, headers=bearer("viewer")) as by_token:
            assert by_token.status == 403
    await log_in(page, served, "operator")
    assert await writes_shown(page, served) == {"Pause", "Trigger now", "Replay 1 matching…"}


async def test_logging_out_ends_the_session_and_a_forged_cookie_is_refused(
    site: Start,
) -> None:
    """The session cookie is HttpOnly, SameSite=Strict, expiring, Secure behind https; after
    log out the same cookie reads nothing, nor does a made-up one."""
    served = await site()
    form = {"name": "alice", "token": TOKENS["operator"], "next": "//evil.example/"}
    async with aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as http:
        async with http.post(served.url + "login", data=form, allow_redirects=False) as login:
            assert (login.status, login.headers["Location"]) == (303, "/")
            cookie = login.cookies[COOKIE]
        assert cookie["httponly"] and cookie["samesite"] == "Strict"
        assert cookie["max-age"] == "43200" and not cookie["secure"]
        proxied = {"X-Forwarded-Proto": "https"}
        login_url = served.url + "login"
        async with http.post(login_url, data=form, headers=proxied, allow_redirects=False) as tls:
            assert tls.cookies[COOKIE]["secure"]

        async def status(session: str, method: str = "GET", path: str = "") -> int:
            cookies = {"Cookie": f"{COOKIE}={session}"}
            url = served.url + path
            async with http.request(method, url, headers=cookies, allow_redirects=False) as got:
                return got.status

        assert await status(cookie.value) == 200
        assert await status(cookie.value, "POST", "logout") == 303
        assert await status(cookie.value) == 303
        assert await status(secrets.token_urlsafe(32)) == 303


async def test_a_dashboard_with_no_token_on_a_network_address_warns_at_start(
    run_monitor: Any,
) -> None:
    """Open pages on 0.0.0.0 are said in the start log; on loopback they are not."""
    with capture_logs() as logs:
        await run_monitor(dashboard_port=free_port(), dashboard_host="0.0.0.0")
        await run_monitor(dashboard_port=free_port())
    warned = [e for e in logs if e["event"].startswith("dashboard open to the network")]
    assert len(warned) == 1 and warned[0]["url"].startswith("http://0.0.0.0:")


def test_a_login_reads_nothing_once_its_session_time_is_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CRON_DASHBOARD_SESSION_SECONDS bounds a session: past it the cookie is no login."""
    auth = Auth("t" * 32, LoginThrottle(5, 60.0), session_seconds=60)
    session = auth.login("alice", "t" * 32, "127.0.0.1")
    assert session is not None
    request = make_mocked_request("GET", "/", headers={"Cookie": f"{COOKIE}={session}"})
    start = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: start + 59)
    assert auth.reader(request) == "operator" and auth.csrf(request)
    monkeypatch.setattr(time, "monotonic", lambda: start + 61)
    assert auth.reader(request) is None and auth.csrf(request) == ""
