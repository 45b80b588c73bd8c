"""Reads of the history stream a viewer asks the monitor for are bounded: in events read per
request (the answer then says it is partial), in reads at once, and they end when their
client hangs up or the monitor stops, leaving no consumer on the stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage

from tests.api import Api, bearer, served_api
from tests.helpers import fired_and_tried, write_history
from tests.inprocess import InProcess
from tests.namespace import TestBroker
from warren_cron.clock import utc_text, utcnow
from warren_cron.faultkit.waits import eventually
from warren_cron.history import reader
from warren_cron.history.events import event
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.monitor import Monitor
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.ops import scans

pytestmark = pytest.mark.broker
#: Events in the namespace's history: many times the bound the tests set.
EVENTS = 30_000
BOUND = 2_000
#: The most events a stream message holds (the publisher's batch): a read may pass its
#: bound by one message's worth.
BATCH = 500
CHUNK = 10_000


async def fill_history(broker: TestBroker, count: int) -> None:
    """Publish ``count`` events of runs of the schedule ``busy`` through a history publisher."""
    publisher = HistoryPublisher(broker.names, broker.settings(), "test", metrics=False)
    await publisher.start(broker.connection)
    now = utcnow()
    for first in range(0, count, CHUNK):  # each chunk within the publisher's buffer
        for n in range(first, min(first + CHUNK, count)):
            ids = {"run_id": f"busy@manual-{utc_text(now)}-{n}", "schedule": "busy", "task": "x"}
            publisher.emit(event("fired", at=now, **ids))
        await sent(publisher, min(first + CHUNK, count))
    await publisher.close()


async def sent(publisher: HistoryPublisher, count: int) -> None:
    """Wait until ``publisher`` has sent ``count`` events."""
    await eventually(lambda: publisher.published >= count, 60, what=f"{count} events sent")


@pytest.fixture
async def busy_api(
    broker: TestBroker, run_monitor: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Api]:
    """A monitor serving the API with a bound of ``BOUND`` events, on a history holding
    ``EVENTS`` events."""
    await fill_history(broker, EVENTS)
    bound = {"history_scan_events": BOUND, "history_scans": 1}
    async with served_api(broker, run_monitor, tmp_path, monkeypatch, **bound) as served:
        yield served


async def test_a_query_matching_nothing_answers_partial_after_the_bound(busy_api: Api) -> None:
    """A list for a schedule no run has reads at most the bound (not the whole stream) and
    says the answer is partial and how to narrow it; a run id naming no time likewise."""
    status, page = await busy_api.call("GET", "/runs?since=7d&schedule=nomatch", "viewer")
    assert status == 200, page
    assert (page["runs"], page["truncated"]) == ([], True)
    assert BOUND <= page["scanned"] <= BOUND + BATCH and "since" in page["hint"]
    status, error = await busy_api.call("GET", "/runs/key:never-used", "viewer")
    assert status == 404 and error["error"]["truncated"] is True, error
    assert error["error"]["scanned"] <= BOUND + BATCH


def stalling(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """Make every stream read stop after its first message as if the broker stalled there:
    a scan that stays in flight until something ends it. The event is set once one did."""
    drain = reader._drain
    never, reached = asyncio.Event(), asyncio.Event()

    async def stalled(*args: Any) -> AsyncGenerator[AbstractIncomingMessage, None]:
        async for message in drain(*args):
            yield message
            reached.set()
            await never.wait()

    monkeypatch.setattr(reader, "_drain", stalled)
    return reached


def slow_cancels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every consumer's cancel answer after a few of the scan gate's looks at its caller,
    as a loaded broker does."""
    cancel = aio_pika.Queue.cancel

    async def slow(self: aio_pika.Queue, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(3 * scans.WATCH_SECONDS)  # the broker's slow answer, not a wait
        return await cancel(self, *args, **kwargs)

    monkeypatch.setattr(aio_pika.Queue, "cancel", slow)


class StreamConsumers:
    """What this process's consumers of one stream went through, in order: each ``consume``,
    each cancel ``answered`` by the broker or ``cut`` before its answer, and the ``close`` of
    a channel that held one (RabbitMQ 3.10 counts a stream's consumer for good when its
    channel closes with its cancel cut half-way)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, stream: str) -> None:
        self.seen: list[tuple[str, int, str]] = []
        consume, cancel, close = (
            aio_pika.Queue.consume,
            aio_pika.Queue.cancel,
            aio_pika.Channel.close,
        )
        spy = self

        async def consumed(queue: aio_pika.Queue, *args: Any, **kwargs: Any) -> Any:
            tag = await consume(queue, *args, **kwargs)
            if queue.name == stream:
                spy.seen.append(("consume", id(queue.channel), tag))
            return tag

        async def cancelled(queue: aio_pika.Queue, tag: str, *args: Any, **kwargs: Any) -> Any:
            try:
                answer = await cancel(queue, tag, *args, **kwargs)
            except BaseException:
                spy.seen.append(("cut", id(queue.channel), tag))
                raise
            spy.seen.append(("answered", id(queue.channel), tag))
            return answer

        async def closed(channel: aio_pika.Channel, *args: Any, **kwargs: Any) -> Any:
            spy.seen.append(("close", id(channel), ""))
            return await close(channel, *args, **kwargs)

        monkeypatch.setattr(aio_pika.Queue, "consume", consumed)
        monkeypatch.setattr(aio_pika.Queue, "cancel", cancelled)
        monkeypatch.setattr(aio_pika.Channel, "close", closed)

    def channels(self) -> set[int]:
        """The channels that consumed the stream."""
        return {channel for kind, channel, _ in self.seen if kind == "consume"}

    def closed(self) -> bool:
        """True once every channel that consumed the stream was closed."""
        done = {channel for kind, channel, _ in self.seen if kind == "close"}
        return bool(self.channels()) and self.channels() <= done

    def left_counted(self) -> list[str]:
        """The consumers whose channel closed before the broker answered their cancel."""
        answered: set[str] = set()
        left = []
        for kind, channel, tag in self.seen:
            if kind == "answered":
                answered.add(tag)
            elif kind == "close":
                tags = {t for k, c, t in self.seen if k == "consume" and c == channel}
                left += sorted(tags - answered)
        return left


@pytest.mark.parametrize("cancel", ["prompt", "slow"])
async def test_a_client_that_hangs_up_leaves_no_consumer_on_the_stream(
    busy_api: Api,
    broker: TestBroker,
    monkeypatch: pytest.MonkeyPatch,
    cancel: str,
) -> None:
    """A request whose client disconnects mid-read ends its read: each of its consumers'
    cancels is answered by the broker before its channel closes, also when the broker answers
    slower than the monitor looks at the client (a loaded machine: it was cut by a second
    cancel). Seen from the monitor's side: the broker's own count of a stream's consumers
    lags by minutes on a loaded machine."""
    reached = stalling(monkeypatch)
    if cancel == "slow":
        slow_cancels(monkeypatch)
    consumers = StreamConsumers(monkeypatch, broker.names.history_stream)
    url = busy_api.url + "/runs?since=1h&schedule=nomatch"
    request = asyncio.create_task(busy_api.http.get(url, headers=bearer("viewer")))
    await asyncio.wait_for(reached.wait(), 60)
    request.cancel()  # the client hangs up
    await asyncio.gather(request, return_exceptions=True)
    await eventually(consumers.closed, 30, what="the read's channel closed")
    assert consumers.left_counted() == [], consumers.seen
    assert [kind for kind, _, _ in consumers.seen].count("cut") == 0, consumers.seen


async def test_reads_at_once_are_bounded_and_a_stop_ends_the_one_in_flight(
    broker: TestBroker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With one read allowed at once, a second gets 429 with Retry-After while the first
    reads, but a long poll waits for its run; the monitor stops promptly with that read and
    another long poll in flight, which are answered at once."""
    await fill_history(broker, EVENTS // 10)
    monitors = InProcess(start_timeout=15)

    async def start(schedules: Any = (), **overrides: Any) -> Monitor:
        ours: dict[str, Any] = {"namespace": broker.names.namespace, "amqp_url": broker.url}
        settings = MonitorSettings(**ours, queue_type=broker.queue_type, **overrides)
        return await monitors.start(Monitor(settings, schedules=schedules))

    async with served_api(broker, start, tmp_path, monkeypatch, history_scans=1) as api:
        reached = stalling(monkeypatch)
        url = api.url + "/runs?schedule=nomatch"
        first = asyncio.create_task(_status(api, url))
        await asyncio.wait_for(reached.wait(), 60)  # the first read consuming
        assert await _status(api, url) == 429
        # A long poll is not refused: the run's events, followed live, answer it from memory.
        run_id = f"tick@{utc_text(utcnow())}"
        waited = asyncio.create_task(api.call("GET", f"/runs/{run_id}?wait=30", "viewer"))
        await write_history(broker, fired_and_tried(run_id, utcnow(), "succeeded"))
        status, run = await waited
        assert (status, run["state"], run["scanned"]) == (200, "succeeded", 0), run
        waiters = api.monitor.dashboard.api.waiters  # type: ignore[union-attr]
        polled = asyncio.create_task(api.call("GET", "/runs/tock@2020-01-01T00:00:00Z?wait=60"))
        await eventually(lambda: waiters.count == 1, 30, what="a long poll waiting")
        # The web server waits up to 60 s for requests under way: they must end first.
        await monitors.stop_all(timeout=15)
        assert await first == 503
        assert (await polled)[0] in (404, 503)


async def _status(api: Api, url: str) -> int:
    """The status of a GET of ``url`` as a viewer; a 429 must say when to try again."""
    async with api.http.get(url, headers=bearer("viewer")) as got:
        assert got.status != 429 or got.headers["Retry-After"]
        return got.status
