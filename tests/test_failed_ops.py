"""Failed records tell one story on every surface: a run id shown is that run id, a ``since``
too far back is named, and a replay that left records behind says where they stay."""

from __future__ import annotations

import ast
import json

import pytest
from aiohttp.test_utils import TestClient, TestServer

from tests.api import Api
from tests.failed_records import ROOT, put_failed, run_warren
from tests.helpers import envelope
from tests.namespace import TestBroker
from warren_cron.failed.tally import Tally
from warren_cron.faultkit.waits import eventually
from warren_cron.monitor import mount
from warren_cron.monitor.api.failed import _moved
from warren_cron.monitor.mount import Dashboard
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.monitor.status_keeper import StatusKeeper
from warren_cron.monitor.web.app import create_app
from warren_cron.monitor.web.dashboard import DASHBOARD
from warren_cron.names import FAILED_KEY
from warren_cron.records import Failure, envelope_record


async def _put_run_ids(broker: TestBroker, *run_ids: str) -> None:
    """One failure record for each run id, published as the worker does."""
    await broker.declare()
    channel = await broker.connection.channel(publisher_confirms=True)
    dlx = await channel.get_exchange(broker.names.dlx)
    failure = Failure("retries-exhausted", "RuntimeError: x", 4)
    for run_id in run_ids:
        record = envelope_record(envelope("job", run_id=run_id), failure)
        await dlx.publish(record, FAILED_KEY, mandatory=True)
    await channel.close()


@pytest.mark.broker
async def test_show_takes_a_run_id_as_it_is_not_as_a_pattern(broker: TestBroker) -> None:
    """``warren failed show 'nightly-*'`` shows that run only, as the dashboard's record page
    does, not every run the pattern would match."""
    await _put_run_ids(broker, "nightly-*", "nightly-1", "nightly-2")
    await broker.wait_depth(broker.names.failed_queue, 3)
    result = run_warren(broker, "failed", "show", "nightly-*", "--json")
    assert result.returncode == 0, result.stderr
    assert '"nightly-*"' in result.stdout
    assert "nightly-1" not in result.stdout and "nightly-2" not in result.stdout


async def test_the_failed_page_names_a_since_too_far_back_instead_of_failing() -> None:
    """``/failed?since=99999999d`` reads as the API says it (too far back), not a server
    error."""
    settings = MonitorSettings(namespace="since-test")
    app = create_app(mount.ROUTES)
    app[DASHBOARD] = Dashboard(settings, [], StatusKeeper(settings), set)
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/failed", params={"since": "99999999d"})
        assert response.status == 200
        assert "since &#39;99999999d&#39; is too far back" in await response.text()


def test_the_api_says_where_unmoved_records_stay_as_the_command_does() -> None:
    """A replay over the API that could not move every record says, as ``warren failed
    replay`` does, that they stay in the failed queue, which were lost to a reconnect, and
    how often it resumed."""
    tally = Tally(matched=4, moved=2, failed=1, reconnects=1)
    message = _moved(tally, False, "replay").message
    assert message == (
        "replayed 2 of 4 matching record(s); 1 could not be moved and stay in the failed "
        "queue; 1 not seen again after a reconnect; resumed after 1 broker reconnect(s)"
    )


def test_the_failed_endpoints_and_pages_import_only_the_operations_not_each_other() -> None:
    """The API's failed endpoints and the dashboard's failed page are adapters over
    ``warren_cron.ops.failed``: neither imports the other, and the operations import neither."""
    modules = {
        "topology/monitor/api/failed.py": "warren_cron.monitor.dashboard",
        "topology/monitor/dashboard/pages/failed.py": "warren_cron.monitor.api",
        "topology/ops/failed.py": "warren_cron.monitor",
    }
    for path, forbidden in modules.items():
        tree = ast.parse((ROOT / path).read_text())
        imported = [
            node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
        ]
        assert not [name for name in imported if name.startswith(forbidden)], path
        if path != "topology/ops/failed.py":
            assert "warren_cron.ops.failed" in imported, path


@pytest.mark.broker
async def test_replay_gives_a_runtime_schedules_records_that_schedules_own_plan(
    broker: TestBroker,
) -> None:
    """A record of a runtime schedule goes back on the retry plan the schedule was created
    with, as a file schedule's does, not on the default plan."""
    retry = {"max_retries": 1, "delay_ms": 250}
    spec = {"name": "hourly", "every": "1h", "task": "job", "retry": retry}
    created = run_warren(broker, "schedules", "create", stdin=json.dumps(spec))
    assert created.returncode == 0, created.stderr
    [own] = await put_failed(broker, 1, schedule="hourly")
    [other] = await put_failed(broker, 1, schedule="gone")
    broker.plan_keys.update({"250ms", "300ms"})
    result = run_warren(
        broker, "failed", "replay", "--all", CRON_MAX_RETRIES="1", CRON_RETRY_DELAY_MS="300"
    )
    assert result.returncode == 0, result.stderr
    moved = {m.message_id: m.routing_key for m in await broker.get_all(broker.names.main_queue)}
    assert moved == {own.run_id: "250ms", other.run_id: "300ms"}


@pytest.mark.broker
async def test_the_api_replays_a_runtime_schedules_records_on_that_schedules_own_plan(
    api: Api, broker: TestBroker
) -> None:
    """``POST /api/v1/failed/replay`` sends a runtime schedule's records back on the plan the
    schedule was created with, as ``warren failed replay`` does."""
    retry = {"max_retries": 1, "delay_ms": 250}
    spec = {"name": "hourly", "every": "1h", "task": "job", "retry": retry}
    assert (await api.call("POST", "/schedules", json={"spec": spec}))[0] == 201
    [own] = await put_failed(broker, 1, schedule="hourly")
    index = api.monitor.dashboard.failed  # type: ignore[union-attr]
    await eventually(lambda: len(index.records) == 1, 20, what="the record indexed")
    broker.plan_keys.add("250ms")
    replay = {"filter": {"schedule": "hourly"}}
    status, moved = await api.call("POST", "/failed/replay", "operator", json=replay)
    assert (status, moved["moved"]) == (200, 1), moved
    moved_to = {m.message_id: m.routing_key for m in await broker.get_all(broker.names.main_queue)}
    assert moved_to == {own.run_id: "250ms"}
