"""A broker outage is reported once when it starts and once when it ends, not per retry."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from aiormq.exceptions import AMQPConnectionError, ConnectionClosed
from structlog.testing import capture_logs

from warren_cron.broker.outage import OutageLog
from warren_cron.faultkit.private_broker import free_port
from warren_cron.faultkit.waits import eventually
from warren_cron.scheduler.service import Scheduler
from warren_cron.scheduler.settings import SchedulerSettings
from warren_cron.schedules.load import parse_schedules


class Connection:
    """A connection as the close callback sees it: closed on purpose or not."""

    def __init__(self, close_called: bool = False) -> None:
        self.close_called = close_called


def outage_lines(logs: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """Level and event of each captured line."""
    return [(line["log_level"], line["event"]) for line in logs]


LOST = ("warning", "broker connection lost; reconnecting")
BACK = ("info", "broker connection back")


def test_an_outage_is_reported_once_however_many_tries_fail() -> None:
    """The close callback runs for the loss and after each failed try: one warning in all."""
    outage, connection = OutageLog("warren-test"), cast(Any, Connection())
    with capture_logs() as logs:
        outage.lost(connection, ConnectionClosed(320, "CONNECTION_FORCED"))
        for _ in range(5):
            outage.lost(connection, AMQPConnectionError(111, "Connect call failed"))
        outage.back(connection)
        outage.lost(connection, ConnectionClosed(320, "CONNECTION_FORCED"))
    assert outage_lines(logs) == [LOST, BACK, LOST]
    assert logs[0]["connection"] == "warren-test"
    assert "CONNECTION_FORCED" in logs[0]["error"]


def test_closing_a_connection_on_purpose_is_no_outage() -> None:
    """A connection closed by its owner (shutdown) logs nothing."""
    outage = OutageLog("warren-test")
    with capture_logs() as logs:
        outage.lost(cast(Any, Connection(close_called=True)), None)
        outage.back(cast(Any, Connection()))
    assert logs == []


async def test_a_scheduler_that_cannot_reach_the_broker_warns_once_then_retries_at_debug(
    tmp_path: Path,
) -> None:
    """No broker: the first failed try is a warning, the next ones every retry are DEBUG."""
    settings = SchedulerSettings(
        namespace="outage",
        amqp_url=f"amqp://guest:guest@127.0.0.1:{free_port()}/",
        schedules_file=tmp_path / "schedules.toml",
        leader_retry_seconds=0.05,
        schedules_poll_seconds=0,
    )
    scheduler = Scheduler(settings, parse_schedules("", settings))
    with capture_logs() as logs:
        running = asyncio.create_task(scheduler.run())
        await eventually(lambda: sum(e["event"].startswith("not leading") for e in logs) >= 4)
        scheduler.stop()
        await asyncio.wait_for(running, 30)
    levels = [line["log_level"] for line in logs if line["event"].startswith("not leading")]
    assert levels[0] == "warning"
    assert set(levels[1:]) == {"debug"}
