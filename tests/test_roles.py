"""One role table for the HTTP API and the dashboard: an action needs the same role on both."""

from __future__ import annotations

import aiohttp
import pytest

from tests.api import TOKENS, Api, bearer
from tests.failed_records import put_failed
from tests.namespace import TestBroker
from warren_cron.faultkit.waits import eventually
from warren_cron.monitor.api.failed import ENDPOINTS as FAILED
from warren_cron.monitor.api.runs import ENDPOINTS as RUNS
from warren_cron.monitor.api.schedules import ENDPOINTS as SCHEDULES
from warren_cron.monitor.roles import NEEDS

pytestmark = pytest.mark.broker


async def _purge_on_dashboard(api: Api, role: str, count: int) -> tuple[int, str]:
    """POST the dashboard's purge form as a client with the token of ``role``."""
    form = {"why": "tidy up", "count": str(count), "schedule": "billing"}
    dashboard = api.url.removesuffix("api/v1") + "failed/purge"
    async with (
        aiohttp.ClientSession() as http,
        http.post(dashboard, data=form, headers=bearer(role)) as answer,
    ):
        return answer.status, await answer.text()


async def test_an_operator_purges_nowhere_and_an_admin_purges_on_the_dashboard(
    api: Api, broker: TestBroker
) -> None:
    """The dashboard's purge needs an admin as the API's does: an operator's token is refused
    on both and the records stay; an admin's token purges them from the dashboard."""
    await put_failed(broker, 2, schedule="billing")
    index = api.monitor.dashboard.failed  # type: ignore[union-attr]
    await eventually(lambda: len(index.records) == 2, 20, what="2 records indexed")
    status, refused = await _purge_on_dashboard(api, "operator", 2)
    assert status == 403 and "this needs admin" in refused, refused
    status, error = await api.call("POST", "/failed/purge", "operator", json={"all": True})
    assert status == 403 and "needs admin" in error["error"]["message"]
    assert (await api.call("GET", "/failed", "viewer"))[1]["matched"] == 2
    status, done = await _purge_on_dashboard(api, "admin", 2)
    assert (status, done.strip()) == (200, "purged 2 of 2 record(s)")
    assert (await api.call("GET", "/failed", "viewer"))[1]["matched"] == 0


def test_every_endpoint_of_the_api_needs_the_role_of_its_action_in_the_one_table() -> None:
    """The API's endpoints name actions, and their roles are the table's."""
    endpoints = [*RUNS, *FAILED, *SCHEDULES]
    assert all(e.action is not None and e.role == NEEDS[e.action] for e in endpoints)
    assert {e.path: e.role for e in FAILED if e.method == "POST"} == {
        "/failed/replay": "operator",
        "/failed/purge": "admin",
    }
    assert set(TOKENS) == set(NEEDS.values())
