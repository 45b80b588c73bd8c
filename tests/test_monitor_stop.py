"""A monitor asked to stop ends cleanly, whatever a broker call under way raises meanwhile."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from tests.namespace import TestBroker
from warren_cron.monitor import Monitor, MonitorSettings


@pytest.mark.broker
async def test_a_stop_whose_stream_read_is_cut_short_still_ends_cleanly(
    broker: TestBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped while the status fold's stream is read: aiormq cancels the call under way as
    its channel closes, and the monitor still stops (exit 0), its connection closed."""
    settings = MonitorSettings(
        namespace=broker.names.namespace, amqp_url=broker.url, queue_type=broker.queue_type
    )
    monitor = Monitor(settings)
    running = asyncio.create_task(monitor.run())
    await asyncio.wait_for(monitor.ready.wait(), 30)

    async def cut_short() -> None:
        raise asyncio.CancelledError  # what aiormq raises for a call its closing channel drops

    monkeypatch.setattr(monitor.keeper, "stop", cut_short)
    with capture_logs() as logs:
        monitor.stop()
        await asyncio.wait_for(running, 30)
    assert not monitor.connected()
    assert [e["event"] for e in logs][-1] == "monitor stopped"
