"""The dashboard's flow page: circuits, limit waits and spent budgets per key, learnt from the
history stream (no worker module), escaped, bounded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import aio_pika
import aiohttp
from aiohttp.test_utils import TestClient, TestServer

from tests.conftest import plan
from tests.dashboard import free_port
from tests.helpers import envelope, publish
from tests.namespace import TestBroker
from tests.test_concurrency_limits import limited_workers
from warren_cron.faultkit.waits import eventually
from warren_cron.flowlimits import FlowLimits
from warren_cron.history.events import Event
from warren_cron.monitor import mount
from warren_cron.monitor.console.flow import FlowSeen
from warren_cron.monitor.mount import Dashboard
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.monitor.status_keeper import StatusKeeper
from warren_cron.monitor.web.app import create_app
from warren_cron.monitor.web.dashboard import DASHBOARD

NOW = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)
EVIL = "<script>alert(1)</script>"


def deferred(at: datetime, reason: str, key: Any, error: str = "held") -> Event:
    """A deferred attempt as the worker writes it to the history."""
    data = {"outcome": "deferred", "reason": reason, "key": key, "error": error}
    return Event("attempt", at, 0, "r@x", "s", data)


def refused(at: datetime, key: str) -> Event:
    """A failure by a spent retry budget."""
    data = {"reason": "retry-budget-exhausted", "key": key, "error": "spent"}
    return Event("failed", at, 0, "r@y", "s", data)


def test_a_circuit_shows_open_while_it_defers_and_waits_count_per_key_and_reason() -> None:
    """Deferrals count by key and reason; a circuit deferring within the last minute is open
    and listed first, one that stopped says so; keys without one have no circuit."""
    seen = FlowSeen()
    old = NOW - timedelta(minutes=10)
    seen.on_events(
        [
            deferred(old, "circuit-open", "http://down:80"),
            deferred(NOW, "circuit-open", "https://api.example:443"),
            deferred(NOW, "circuit-open", "https://api.example:443"),
            deferred(NOW, "rate-limit", "schedule:sync[customer=acme]"),
            deferred(NOW, "concurrency-limit", "schedule:sync[customer=acme]"),
            refused(NOW, "https://api.example:443"),
            deferred(NOW, "rate-limit", None),  # written without a key: not a row
        ],
        0,
    )
    rows = seen.rows(NOW)
    assert rows[0].key == "https://api.example:443"
    by_key = {r.key: r for r in rows}
    assert by_key["https://api.example:443"].circuit(NOW) == "open"
    assert by_key["https://api.example:443"].deferred == {"circuit-open": 2}
    assert by_key["https://api.example:443"].refused == 1
    assert by_key["http://down:80"].circuit(NOW) == "deferring stopped"
    limited = by_key["schedule:sync[customer=acme]"]
    assert limited.circuit(NOW) is None
    assert limited.deferred == {"rate-limit": 1, "concurrency-limit": 1}
    assert len(rows) == 3


def test_many_keys_are_bounded_and_a_day_old_key_is_forgotten() -> None:
    """At most ``max_keys`` kept, the least recently seen dropped; a day-old key goes."""
    seen = FlowSeen(max_keys=50)
    seen.on_events([deferred(NOW, "rate-limit", f"k{i}") for i in range(500)], 0)
    assert len(seen.keys) == 50 and "k499" in seen.keys and "k0" not in seen.keys
    assert seen.rows(NOW + timedelta(hours=25)) == []


async def test_the_flow_page_escapes_keys_and_messages() -> None:
    """A key or a message holding HTML is shown as text."""
    settings = MonitorSettings(namespace="flow-page-test")
    dashboard = Dashboard(settings, [], StatusKeeper(settings), set)
    now = datetime.now(UTC)
    dashboard.flow.on_events([deferred(now, "circuit-open", EVIL, error=EVIL)], 0)
    app = create_app(mount.ROUTES)
    app[DASHBOARD] = dashboard
    async with TestClient(TestServer(app)) as client:
        page = await (await client.get("/flow")).text()
    assert EVIL not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert ">open<" in page and 'href="/flow"' in page


async def test_an_empty_flow_page_says_nothing_is_held_back() -> None:
    """No deferral in the last day: the page says so."""
    settings = MonitorSettings(namespace="flow-page-empty")
    dashboard = Dashboard(settings, [], StatusKeeper(settings), set)
    app = create_app(mount.ROUTES)
    app[DASHBOARD] = dashboard
    async with TestClient(TestServer(app)) as client:
        page = await (await client.get("/flow")).text()
    assert "nothing held back" in page


async def test_the_page_learns_a_workers_rate_waits_from_the_broker(
    broker: TestBroker, run_worker: Any
) -> None:
    """A worker defers tasks over a schedule's rate; the dashboard, following the history
    stream on the broker, shows the schedule's key with its waits."""
    await limited_workers(run_worker, 1, None)
    limits = FlowLimits(rate="1/1s", key="customer")
    for _ in range(3):
        payload = {"seconds": 0, "customer": "acme"}
        await publish(broker, envelope("busy", payload, schedule="s", limits=limits), plan(60_000))
    settings = MonitorSettings(
        namespace=broker.names.namespace, amqp_url=broker.url, dashboard_port=free_port()
    )
    dashboard = Dashboard(settings, [], StatusKeeper(settings), set)
    connection = await aio_pika.connect_robust(broker.url)
    await dashboard.start(connection)
    try:
        await eventually(
            lambda: "schedule:s[customer=acme]" in dashboard.flow.keys, 30, what="a wait seen"
        )
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{dashboard.url}flow") as answer,
        ):
            page = await answer.text()
        assert "schedule:s[customer=acme]" in page
        assert dashboard.flow.keys["schedule:s[customer=acme]"].deferred["rate-limit"] >= 1
    finally:
        await dashboard.stop()
        await connection.close()
