"""The run page's cancel action on a real monitor and broker: the page is shown to a
logged-in user, with the form for a run that has not ended; refused without the session's
CSRF token or a login, done with it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import aiohttp
import pytest

from tests.dashboard import free_port
from tests.namespace import TestBroker
from tests.test_cancel_command import fired_ahead
from warren_cron.client import Client
from warren_cron.faultkit.waits import eventually

pytestmark = pytest.mark.broker
TOKEN = "dashboard-token-for-cancel-tests"


@pytest.fixture
async def site(run_monitor: Any) -> AsyncIterator[tuple[str, aiohttp.ClientSession]]:
    """A monitor's dashboard with a token, and an HTTP client keeping cookies."""
    monitor = await run_monitor(dashboard_port=free_port(), dashboard_token=TOKEN)
    assert monitor.dashboard is not None and monitor.dashboard.url is not None
    # unsafe: keep the session cookie of an IP address host (127.0.0.1).
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        yield monitor.dashboard.url, http


async def page_of(http: aiohttp.ClientSession, url: str, run_id: str) -> str:
    """The run page's HTML once the run's event is known to the dashboard."""

    async def shown() -> str | None:
        async with http.get(url + "runs/" + quote(run_id, safe="")) as got:
            text = await got.text()
            return text if got.status == 200 else None

    found: str | None = await eventually(shown, 15, what="the run page")
    assert found is not None
    return found


async def test_a_logged_in_user_cancels_a_run_from_its_page_with_the_csrf_token(
    broker: TestBroker, client: Client, site: tuple[str, aiohttp.ClientSession]
) -> None:
    """Anonymous: sent to log in, and a POST is refused. Logged in: the form is there; a POST
    without the CSRF token is refused; with it, the run ends cancelled by the user."""
    url, http = site
    [run_id] = await fired_ahead(client, "x<b>")
    run_page = url + "runs/" + quote(run_id, safe="")
    async with http.get(run_page, allow_redirects=False) as anonymous:
        assert anonymous.status == 303
        assert anonymous.headers["Location"].startswith("/login?next=/runs/")
    action = url + "runs/" + quote(run_id, safe="") + "/cancel"
    async with http.post(action, data={"why": "x"}, allow_redirects=False) as refused:
        assert refused.status == 403
    form = {"name": "alice", "token": TOKEN}
    async with http.post(url + "login", data=form, allow_redirects=False) as login:
        assert login.status == 303
    page = await page_of(http, url, run_id)
    assert "Cancel run" in page and "<b>" not in page
    [csrf] = re.findall(r'name="csrf" value="([0-9a-f]+)"', page)
    async with http.post(action, data={"why": "x"}, allow_redirects=False) as stale:
        assert stale.status == 403 and "reload the page" in await stale.text()
    assert (await client.run(run_id).status()).state == "delayed"
    done = {"why": "wrong day", "csrf": csrf, "back": "//evil.example"}
    async with http.post(action, data=done, allow_redirects=False) as answer:
        assert answer.status == 303 and answer.headers["Location"].startswith("/runs/")
    status = await client.run(run_id).status()
    assert status.state == "cancelled" and status.reason == "wrong day"
