"""A broker outage in a worker's log: JSON lines only, said once when lost and once when back."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.processes import Proc, Procs

pytestmark = pytest.mark.faults

#: The worker's robust connections, each reporting its own outage.
CONNECTIONS = [
    "warren-worker-announce",
    "warren-worker-cancels",
    "warren-worker-consume",
    "warren-worker-publish",
]
#: What aio-pika logs for every failed reconnect try.
RETRY_LINE = "Connection attempt to"


def events_of(proc: Proc) -> list[dict[str, Any]]:
    """Every line the process wrote to stdout and stderr, each parsed as one JSON object."""
    events = [orjson.loads(line) for line in proc.log_path.read_bytes().splitlines()]
    assert all(isinstance(event, dict) for event in events), events
    return events


def reports(events: list[dict[str, Any]], event: str) -> list[tuple[str, str]]:
    """Level and connection of each ``event`` line, sorted by connection."""
    return sorted((e["level"], e["connection"]) for e in events if e["event"] == event)


async def test_a_broker_outage_is_logged_once_in_json_with_the_retries_at_debug(
    procs: Procs, private_broker: PrivateBroker
) -> None:
    """Broker stopped for several tries: a warning and an info per connection, retries DEBUG."""
    worker = await procs.worker(CRON_LOG_LEVEL="DEBUG")
    await asyncio.to_thread(private_broker.stop)
    await worker.wait_log(RETRY_LINE, count=3 * len(CONNECTIONS))
    await asyncio.to_thread(private_broker.start)
    await worker.wait_log('"broker connection back"', count=len(CONNECTIONS), timeout=60)
    await worker.wait_log('"consuming again"')
    events = events_of(worker)
    lost = "broker connection lost; reconnecting"
    assert reports(events, lost) == [("warning", name) for name in CONNECTIONS]
    assert reports(events, "broker connection back") == [("info", name) for name in CONNECTIONS]
    retries = [e for e in events if e["event"].startswith(RETRY_LINE)]
    assert {e["level"] for e in retries} == {"debug"}
    louder = [e for e in events if e["level"] not in ("debug", "info") and e["event"] != lost]
    assert louder == []
    assert ":guest@" not in worker.log()  # the node's URL is amqp://guest:guest@...
