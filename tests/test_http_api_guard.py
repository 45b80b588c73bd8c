"""The HTTP API's guards on a real monitor: tokens, roles, hostile bodies and names, and
two writers racing on one version."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs
from yarl import URL

from tests.api import SPEC, TOKENS, Api
from warren_cron.monitor.api.routes import MAX_BODY

pytestmark = pytest.mark.broker


async def test_no_token_or_a_wrong_one_is_401_and_a_burst_of_wrong_ones_is_429(
    api: Api,
) -> None:
    """No token: 401 with a Bearer challenge; five wrong ones: 401s, then 429 with
    Retry-After even for the right token; no token value reaches the logs."""
    with capture_logs() as logs:
        status, refused = await api.call("GET", "/schedules", role=None)
        assert (status, refused["error"]["code"]) == (401, "unauthorized")
        assert "Authorization: Bearer" in refused["error"]["message"]
        wrong = {"Authorization": "Bearer guess-1234"}
        for _ in range(5):
            status, _ = await api.call("GET", "/schedules", role=None, headers=wrong)
            assert status == 401
        async with api.http.get(api.url + "/schedules", headers=_bearer("viewer")) as got:
            assert (got.status, got.headers["Retry-After"]) == (429, "60")
            assert (await got.json())["error"]["code"] == "throttled"
    assert not any("guess-1234" in str(e) or TOKENS["viewer"] in str(e) for e in logs)


def _bearer(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[role]}"}


async def test_a_viewer_cannot_write_and_nothing_changes(api: Api) -> None:
    """Every write with a viewer token is 403 naming the role it needs; the schedule keeps
    its version and is not paused."""
    await api.call("POST", "/schedules", json={"spec": SPEC})
    writes = [
        ("POST", "/schedules", {"spec": {**SPEC, "name": "other"}}),
        ("PUT", "/schedules/rt", {"version": 1, "changes": {"every": "1m"}}),
        ("DELETE", "/schedules/rt", None),
        ("POST", "/schedules/rt/pause", {"reason": "x"}),
        ("POST", "/schedules/rt/trigger", None),
    ]
    for method, path, body in writes:
        status, refused = await api.call(method, path, role="viewer", json=body)
        assert (status, refused["error"]["code"]) == (403, "forbidden"), path
        assert "role viewer" in refused["error"]["message"]
    status, operator = await api.call("DELETE", "/schedules/rt", role="operator")
    assert status == 403 and "needs admin" in operator["error"]["message"]
    _, listed = await api.call("GET", "/schedules", role="viewer")
    rows = [(r["name"], r["version"], r["status"]) for r in listed["schedules"]]
    assert rows == [("from-file", None, "active"), ("rt", 1, "active")]


async def test_bad_bodies_get_the_status_that_says_what_to_fix(api: Api) -> None:
    """A huge body: 413 with the limit; not JSON: 415; malformed JSON: 400; an invalid or
    unknown field: 400 naming it; a file schedule's name: 409."""
    huge = {"spec": {**SPEC, "payload": "x" * (MAX_BODY + 1)}}
    status, refused = await api.call("POST", "/schedules", json=huge)
    assert (status, refused["error"]["limit"]) == (413, MAX_BODY)
    status, refused = await api.call("POST", "/schedules", data="name=rt")
    assert status == 415 and "application/json" in refused["error"]["message"]
    json_type = {"Content-Type": "application/json"}
    status, refused = await api.call("POST", "/schedules", data="{'spec':", headers=json_type)
    assert (status, refused["error"]["code"]) == (400, "malformed_json")
    bad_cron = {"spec": {**SPEC, "every": None, "cron": "61 * * * *"}}
    status, refused = await api.call("POST", "/schedules", json=bad_cron)
    assert status == 400 and "cron" in refused["error"]["message"]
    status, refused = await api.call("POST", "/schedules", json={"spec": SPEC, "colour": 1})
    assert status == 400 and refused["error"]["message"].startswith("colour:")
    status, refused = await api.call(
        "POST", "/schedules", json={"spec": {**SPEC, "name": "from-file"}}
    )
    assert (status, refused["error"]["code"]) == (409, "name_taken")
    _, listed = await api.call("GET", "/schedules", role="viewer")
    assert [r["name"] for r in listed["schedules"]] == ["from-file"]


@pytest.mark.parametrize(
    "path",
    [
        "/schedules/..%2F..%2Fopenapi.json",
        "/schedules/%2E%2E",
        "/schedules/a%2Fb",
        "/schedules/..",
        "/schedules/rt%00",
        "/schedules/%2e%2e%2Frt",
        "/schedules/rt%2F..%2F..%2Fschedules",
        "/schedules//",
    ],
)
async def test_a_name_with_path_tricks_is_refused_as_json(api: Api, path: str) -> None:
    """An encoded slash, dot segments or a NUL never reach another resource: a read or an
    archive is 400 naming the name, or 404, as a JSON error; the schedule is untouched."""
    await api.call("POST", "/schedules", json={"spec": SPEC})
    url = URL(api.url + path, encoded=True)
    for method in ("GET", "DELETE"):
        async with api.http.request(method, url, headers=_bearer("admin")) as got:
            assert got.status in (400, 404), (method, got.status, await got.text())
            error = (await got.json())["error"]
            assert got.status == 404 or error["message"].startswith("name: ")
    _, rt = await api.call("GET", "/schedules/rt", role="viewer")
    assert (rt["status"], rt["version"]) == ("active", 1)


async def test_two_puts_on_one_version_one_wins_and_the_other_gets_409_with_both(
    api: Api,
) -> None:
    """Concurrent PUTs based on version 1: one 200 (version 2), one 409 naming the version
    it expected and the current one."""
    await api.call("POST", "/schedules", json={"spec": SPEC})
    puts = [
        api.call("PUT", "/schedules/rt", json={"version": 1, "changes": {"every": every}})
        for every in ("1m", "2m")
    ]
    answers = sorted(await asyncio.gather(*puts), key=lambda answer: answer[0])
    (won, done), (lost, conflict) = answers
    assert (won, done["version"], lost) == (200, 2, 409)
    assert conflict["error"] | {"message": ""} == {
        "code": "version_conflict",
        "message": "",
        "expected": 1,
        "current": 2,
    }


async def test_unknown_paths_and_methods_are_json_errors(api: Api) -> None:
    """404 and 405 under /api/ are JSON saying where the document of the API is."""
    status, missing = await api.call("GET", "/nothing", role="viewer")
    assert status == 404 and "openapi.json" in missing["error"]["message"]
    status, _ = await api.call("PATCH", "/schedules", role="viewer")
    assert status == 405
