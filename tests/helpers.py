"""Publishing and recording helpers shared by the broker tests."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import aio_pika

from tests.namespace import TestBroker
from warren_cron.clock import utc_text, utcnow
from warren_cron.envelope import Envelope, one_off_run_id
from warren_cron.faultkit.waits import eventually
from warren_cron.history.events import Event, encode, event
from warren_cron.history.reader import read_stream
from warren_cron.history.stream import declare_history
from warren_cron.plan import RetryPlan
from warren_cron.publish import TaskPublisher
from warren_cron.worker.context import TaskContext
from warren_cron.worker.registry import Registry


def registry(**handlers: Any) -> Registry:
    """A registry holding the given handlers under their keyword names."""
    reg = Registry()
    for name, func in handlers.items():
        reg.register(name, func)
    return reg


def envelope(task: str, payload: Any = None, **fields: Any) -> Envelope:
    """A one-off envelope for ``task``."""
    fields.setdefault("run_id", one_off_run_id(task))
    return Envelope(task=task, payload=payload, scheduled_for=utcnow(), **fields)


async def publish(broker: TestBroker, env: Envelope, plan: RetryPlan) -> None:
    """Publish as the scheduler does: topology and plan declared, confirmed, mandatory."""
    await publish_all(broker, [env], plan)


async def publish_all(broker: TestBroker, envs: list[Envelope], plan: RetryPlan) -> None:
    """Publish ``envs`` one after another on one channel, declared once: within moments of
    each other, however slow a declare is on a loaded machine."""
    broker.plan_keys.update(step.key for step in plan.suffixes())
    channel = await broker.channel()
    topology = await broker.declare()
    publisher = TaskPublisher(channel, topology.tasks, broker.names, "classic")
    for env in envs:
        await publisher.publish(env, plan)
    await channel.close()


async def publish_raw(broker: TestBroker, body: bytes, key: str, **props: Any) -> None:
    """Publish any body to the tasks exchange, as a foreign or broken client might."""
    channel = await broker.channel()
    exchange = await channel.get_exchange(broker.names.tasks_exchange)
    await exchange.publish(aio_pika.Message(body, **props), key, mandatory=True)
    await channel.close()


@dataclass
class Recorder:
    """Handler that records every call; fails while ``failures`` says so."""

    failures: int = 0
    error: type[Exception] = RuntimeError
    sleep: float = 0.0
    calls: list[tuple[float, TaskContext]] = field(default_factory=list)
    finished: int = 0
    started: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, payload: Any, ctx: TaskContext) -> None:
        """Record the attempt, then sleep and fail as configured."""
        self.calls.append((time.monotonic(), ctx))
        self.started.set()
        if self.sleep:
            await asyncio.sleep(self.sleep)
        self.finished += 1
        if len(self.calls) <= self.failures:
            raise self.error(f"failure {len(self.calls)}")

    async def wait_calls(self, count: int, timeout: float = 10) -> None:
        """Wait until the handler ran ``count`` times."""
        await eventually(lambda: len(self.calls) >= count, timeout, what=f"{count} call(s)")

    def gaps(self) -> list[float]:
        """Seconds between consecutive attempts."""
        times = [t for t, _ in self.calls]
        return [b - a for a, b in itertools.pairwise(times)]


async def history(broker: TestBroker) -> list[Event]:
    """Every event in the namespace's history stream now."""
    stream = broker.names.history_stream
    return [event async for event in read_stream(broker.connection, stream)]


def fired_and_tried(run_id: str, at: datetime, outcome: str) -> list[dict[str, Any]]:
    """A scheduled run's events: fired at ``at``, one attempt a second later ending so."""
    ids = {"run_id": run_id, "schedule": run_id.split("@")[0], "task": "job"}
    fired = event("fired", at=at, **ids, scheduled_for=utc_text(at), plan="1s")
    ended = at + timedelta(seconds=1)
    return [fired, event("attempt", at=ended, **ids, attempt=1, outcome=outcome, reason=outcome)]


async def write_history(broker: TestBroker, *batches: list[dict[str, Any]]) -> None:
    """Publish each batch of events (``topology.history.events.event``) as one stream
    message, confirmed, as the processes' history publishers send them."""
    await declare_history(broker.connection, broker.names, broker.settings())
    channel = await broker.connection.channel(publisher_confirms=True)
    for batch in batches:
        message = aio_pika.Message(encode(batch))
        await channel.default_exchange.publish(message, broker.names.history_stream)
    await channel.close()


async def wait_history(
    broker: TestBroker, done: Callable[[list[Event]], bool], what: str, timeout: float = 10
) -> list[Event]:
    """Read the history stream until ``done`` holds for its events; return them."""
    found: list[Event] = []

    async def check() -> bool:
        found[:] = await history(broker)
        return done(found)

    await eventually(check, timeout, what=what)
    return found


def attempt_ended(run_id: str, outcome: str) -> Callable[[list[Event]], bool]:
    """A condition for ``wait_history``: an attempt of ``run_id`` ended with ``outcome``."""

    def seen(events: list[Event]) -> bool:
        return any(e.run_id == run_id and e.get("outcome") == outcome for e in events)

    return seen
