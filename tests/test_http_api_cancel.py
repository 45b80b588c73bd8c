"""``POST /api/v1/runs/{run_id}/cancel`` on a real monitor and broker: roles, audit, the
answer for an ended run, hostile input, and the OpenAPI document."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api import Api
from tests.helpers import Recorder, registry, wait_history
from tests.namespace import TestBroker
from tests.test_cancel import attempts_end
from warren_cron.client import Client

pytestmark = pytest.mark.broker


async def test_an_operator_cancels_a_delayed_run_audited_and_a_viewer_cannot(
    api: Api, broker: TestBroker, client: Client
) -> None:
    """A viewer's cancel is refused (403) and changes nothing; the operator's is accepted
    (202), the run shows cancelled, and the history names the token and its reason."""
    handle = client.run(await client.enqueue("job", delay=3600))
    path = f"/runs/{handle.run_id}/cancel"
    status, error = await api.call("POST", path, "viewer", json={"reason": "nope"})
    assert status == 403 and "needs operator" in error["error"]["message"]
    assert (await handle.status()).state == "delayed"
    status, done = await api.call("POST", path, "operator", json={"reason": "customer left"})
    # An application's enqueue writes no event: the API knows of no due time, hence pending.
    assert status == 202 and done["cancelled"] is True and done["state"] == "pending"
    assert (await handle.status()).state == "cancelled"

    def audited(events: list[Any]) -> bool:
        return any(e.type == "cancelled" and e.run_id == handle.run_id for e in events)

    events = await wait_history(broker, audited, "the cancel's audit")
    [audit] = [e for e in events if e.type == "cancelled"]
    assert (audit.get("by"), audit.get("reason")) == ("oncall", "customer left")


async def test_a_cancel_without_a_body_works_and_an_ended_run_answers_409(
    api: Api, client: Client, run_worker: Any
) -> None:
    """No body: cancelled without a reason. A run that succeeded: 409 already_ended, with
    its state, and it stays succeeded."""
    pending = client.run(await client.enqueue("job", delay=3600))
    status, _ = await api.call("POST", f"/runs/{pending.run_id}/cancel", "operator")
    assert status == 202
    await run_worker(registry(job=Recorder()))
    done = client.run(await client.enqueue("job"))
    await attempts_end(done, "succeeded")
    status, error = await api.call("POST", f"/runs/{done.run_id}/cancel", "operator")
    assert status == 409 and error["error"]["code"] == "already_ended"
    assert error["error"]["state"] == "succeeded" and "already ended" in error["error"]["message"]


@pytest.mark.parametrize(
    ("run_id", "body", "why"),
    [
        ("x" * 400, {}, "run id"),
        ("job@2026", {"reason": "x" * 100_000}, "reason"),
        ("job@2026", {"reason": 7}, "reason"),
        ("job@2026", {"colour": "red"}, "colour"),
    ],
)
async def test_hostile_input_gets_400_naming_the_field(
    api: Api, run_id: str, body: dict[str, Any], why: str
) -> None:
    """A huge run id, a huge or non-text reason, an unknown field: 400 naming it."""
    status, error = await api.call("POST", f"/runs/{run_id}/cancel", "operator", json=body)
    assert status in (400, 413) and why in error["error"]["message"]


async def test_the_openapi_document_describes_the_cancel(api: Api) -> None:
    """The endpoint is in the document with its role, body, answer and errors."""
    status, doc = await api.call("GET", "/openapi.json", None)
    operation = doc["paths"]["/api/v1/runs/{run_id}/cancel"]["post"]
    assert status == 200 and "operator" in operation["description"]
    assert {"202", "400", "403", "409", "503"} <= set(operation["responses"])
    assert "CancelBody" in str(operation["requestBody"])
