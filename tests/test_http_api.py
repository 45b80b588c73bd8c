"""The HTTP API on a real monitor and broker: runtime schedules created, changed, archived;
file and runtime schedules paused, resumed and triggered; every write in the history."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from openapi_spec_validator import validate

from tests.api import SPEC, Api
from tests.helpers import wait_history
from tests.namespace import TestBroker
from warren_cron.history.events import Event
from warren_cron.monitor.api.serve import ENDPOINTS
from warren_cron.store.admin import ScheduleAdmin

pytestmark = pytest.mark.broker


def changes(events: list[Event]) -> list[tuple[Any, Any, Any]]:
    """The ``changed`` events: (change, by, version)."""
    return [(e.get("change"), e.get("by"), e.get("version")) for e in events if e.type == "changed"]


async def test_an_admin_creates_changes_and_archives_a_schedule_audited_by_token_name(
    api: Api, broker: TestBroker
) -> None:
    """POST creates (201, version 1), PUT with the version read changes it, DELETE archives
    it; GET shows each change with the token's name, and so does the history stream."""
    status, made = await api.call("POST", "/schedules", json={"spec": SPEC, "reason": "new"})
    assert (status, made["version"], made["status"], made["source"]) == (
        201,
        1,
        "active",
        "runtime",
    )
    body = {"version": 1, "changes": {"cron": "0 3 * * *"}, "reason": "later"}
    status, moved = await api.call("PUT", "/schedules/rt", json=body)
    assert (status, moved["version"], moved["spec"]["cron"]) == (200, 2, "0 3 * * *")
    assert "every" not in moved["spec"]
    status, gone = await api.call("DELETE", "/schedules/rt", params={"reason": "churned"})
    assert (status, gone["status"], gone["version"]) == (200, "archived", 3)
    status, got = await api.call("GET", "/schedules/rt", role="viewer")
    assert status == 200
    assert [(h["kind"], h["by"], h["reason"]) for h in got["history"]] == [
        ("create", "deployer", "new"),
        ("update", "deployer", "later"),
        ("archive", "deployer", "churned"),
    ]
    expected = [("create", "deployer", 1), ("update", "deployer", 2), ("archive", "deployer", 3)]
    await wait_history(broker, lambda es: changes(es) == expected, "three audited changes")


async def test_the_list_shows_file_and_runtime_schedules_to_a_viewer(api: Api) -> None:
    """GET /schedules: the file's schedule, then the runtime one, with source and version."""
    await api.call("POST", "/schedules", json={"spec": SPEC})
    status, listed = await api.call("GET", "/schedules", role="viewer")
    rows = [(r["name"], r["source"], r["version"]) for r in listed["schedules"]]
    assert (status, rows) == (200, [("from-file", "file", None), ("rt", "runtime", 1)])
    status, got = await api.call("GET", "/schedules/from-file", role="viewer")
    assert (status, got["source"], got["spec"]["every"], got["history"]) == (200, "file", "1h", [])


async def test_polling_reads_writes_nothing_to_the_store_log(api: Api) -> None:
    """A viewer reading the list and a schedule again and again appends no marker to the
    log: the monitor answers from the store it follows."""
    await api.call("POST", "/schedules", json={"spec": SPEC})
    dashboard = api.monitor.dashboard
    assert dashboard is not None
    book = dashboard.api.admin.book
    offset = book.state.offset
    for _ in range(5):
        assert (await api.call("GET", "/schedules", role="viewer"))[0] == 200
        assert (await api.call("GET", "/schedules/rt", role="viewer"))[0] == 200
    await book.sync()  # one marker of the test's own: every earlier message is folded
    assert book.state.offset == offset + 1


@pytest.mark.parametrize("name", ["from-file", "rt"])
async def test_an_operator_pauses_resumes_and_triggers_file_and_runtime_schedules(
    api: Api, broker: TestBroker, name: str
) -> None:
    """pause shows in GET as paused by the token; a second pause changes nothing; resume
    clears it; trigger publishes one run to the main queue; each is in the history."""
    await api.call("POST", "/schedules", json={"spec": SPEC})
    path = f"/schedules/{name}"
    status, done = await api.call("POST", path + "/pause", "operator", json={"reason": "db move"})
    assert (status, done["changed"]) == (200, True)
    status, got = await api.call("GET", path, role="viewer")
    assert (got["status"], got["paused_by"], got["reason"]) == ("paused", "oncall", "db move")
    status, again = await api.call("POST", path + "/pause", "operator", json={"reason": "x"})
    assert (status, again["changed"]) == (200, False)
    status, done = await api.call("POST", path + "/resume", "operator")
    assert (status, done["changed"]) == (200, True)
    status, fired = await api.call("POST", path + "/trigger", "operator", json={"reason": "now"})
    assert status == 200 and fired["run_id"].startswith(name)
    await broker.wait_depth(broker.names.main_queue, 1)

    def audited(events: list[Event]) -> bool:
        acts = ("paused", "resumed", "triggered")
        kinds = [(e.type, e.get("by")) for e in events if e.schedule == name and e.type in acts]
        return kinds == [("paused", "oncall"), ("resumed", "oncall"), ("triggered", "oncall")]

    await wait_history(broker, audited, f"pause, resume and trigger of {name} by oncall")


@pytest.fixture
def store_pauses_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's follower of the pauses folds what it reads half a second late (as on a
    loaded machine), while the status's follows at once."""
    folded = ScheduleAdmin._on_control

    def late(admin: ScheduleAdmin, events: list[Event], offset: int) -> None:
        asyncio.get_running_loop().call_later(0.5, folded, admin, events, offset)

    monkeypatch.setattr(ScheduleAdmin, "_on_control", late)


@pytest.mark.usefixtures("store_pauses_lag")
async def test_a_runtime_schedule_reads_paused_right_after_its_pause_when_the_store_lags(
    api: Api,
) -> None:
    """The pause's answer comes once every view of the monitor has it: the very next GET
    of a runtime schedule (read from the store's view) says paused, and after the resume,
    active."""
    await api.call("POST", "/schedules", json={"spec": SPEC})
    await api.call("POST", "/schedules/rt/pause", "operator", json={"reason": "db move"})
    got = (await api.call("GET", "/schedules/rt", role="viewer"))[1]
    assert (got["status"], got["reason"]) == ("paused", "db move")
    await api.call("POST", "/schedules/rt/resume", "operator")
    assert (await api.call("GET", "/schedules/rt", role="viewer"))[1]["status"] == "active"


async def test_an_archived_schedule_cannot_be_paused_or_triggered(api: Api) -> None:
    """404 saying it is archived; nothing is published."""
    await api.call("POST", "/schedules", json={"spec": SPEC})
    await api.call("DELETE", "/schedules/rt")
    status, refused = await api.call("POST", "/schedules/rt/trigger", "operator")
    assert status == 404 and "rt" in refused["error"]["message"]


async def test_the_openapi_document_is_valid_and_describes_every_route(api: Api) -> None:
    """/api/v1/openapi.json needs no token, is a valid OpenAPI 3.1 document, and names
    every endpoint served, with the role it needs."""
    status, doc = await api.call("GET", "/openapi.json", role=None)
    assert status == 200
    validate(doc)
    served = {(e.method.lower(), "/api/v1" + e.path) for e in ENDPOINTS}
    described = {(m, path) for path, ops in doc["paths"].items() for m in ops}
    assert described == served
    create = doc["paths"]["/api/v1/schedules"]["post"]
    assert "`admin`" in create["description"] and set(create["responses"]) >= {"201", "409"}
    assert "ScheduleSpec" in doc["components"]["schemas"]
