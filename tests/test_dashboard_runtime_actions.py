"""The dashboard's trigger, pause and resume act on runtime schedules as on the file's: a
real monitor following the store, a token of each role, the store's pause read back."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api import SPEC, Api, bearer
from tests.helpers import wait_history
from tests.namespace import TestBroker
from warren_cron.faultkit.waits import eventually

pytestmark = pytest.mark.broker


async def act(api: Api, action: str, role: str, name: str = "rt") -> tuple[int, str]:
    """POST the dashboard's action form for ``name`` with ``role``'s bearer token."""
    assert api.monitor.dashboard is not None and api.monitor.dashboard.url is not None
    url = f"{api.monitor.dashboard.url}schedules/{name}/{action}"
    async with api.http.post(
        url, data={"why": f"{action} from a test"}, headers=bearer(role)
    ) as got:
        return got.status, await got.text()


async def paused(api: Api) -> Any:
    """Whether the API shows the runtime schedule paused."""
    return (await api.call("GET", "/schedules/rt", "viewer"))[1]["paused"]


async def test_an_operator_pauses_triggers_and_resumes_a_runtime_schedule(
    api: Api, broker: TestBroker
) -> None:
    """Each action does what the API's would, and says so; the history names the token."""
    assert (await api.call("POST", "/schedules", json={"spec": SPEC}))[0] == 201
    status, said = await act(api, "pause", "operator")
    assert status == 200 and said.startswith("paused rt"), said
    await eventually(lambda: paused(api), 10, what="the pause in the API")
    status, said = await act(api, "trigger", "operator")
    assert status == 200 and said.startswith("triggered rt: run "), said
    run_id = said.split("run ", 1)[1].strip()
    events = await wait_history(broker, lambda e: any(x.type == "triggered" for x in e), "audit")
    [audit] = [e for e in events if e.type == "triggered"]
    assert (audit.run_id, audit.get("by")) == (run_id, "oncall@dashboard (127.0.0.1)")
    status, said = await act(api, "resume", "operator")
    assert status == 200 and said.startswith("resumed rt"), said

    async def running() -> bool:
        return not await paused(api)

    await eventually(running, 10, what="the resume in the API")


async def test_a_viewer_cannot_act_and_an_archived_or_unknown_schedule_is_404(
    api: Api,
) -> None:
    """A viewer's token is refused with what it needs; nothing paused. Archived and unknown
    names are 404 for an operator, with what the dashboard looked in."""
    await api.call("POST", "/schedules", json={"spec": SPEC})
    status, said = await act(api, "pause", "viewer")
    assert status == 403 and "needs operator" in said, said
    assert await paused(api) is False
    assert (await api.call("DELETE", "/schedules/rt", params={"reason": "gone"}))[0] == 200
    for name in ("rt", "no-such"):
        status, said = await act(api, "trigger", "operator", name)
        assert status == 404 and "nor a live runtime schedule" in said, said
