"""A worker process that runs every task as a long attempt (``worker/longrun.py``) with the
worker's own subscription, fate and settler, for the long-job tests to start and kill.

Its handlers note each attempt's start and end, with their process id, in the JSON-lines file
``LONG_LEDGER``: the tests read there which worker ran what, when, and whether two attempts
of one run ever overlapped. Run with ``python -m tests.long_worker``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import orjson
from aiormq.abc import DeliveredMessage

from warren_cron.broker.connect import connect, publish_channel
from warren_cron.codec import decode
from warren_cron.declare import declare_topology
from warren_cron.envelope import Envelope
from warren_cron.headers import attempt_number
from warren_cron.names import Names
from warren_cron.runtime.logs import configure_logging
from warren_cron.runtime.settings import load_settings
from warren_cron.worker.acks import Acks
from warren_cron.worker.attempt import Result, run_attempt
from warren_cron.worker.cancels import Cancels
from warren_cron.worker.context import TaskContext
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.fate import Settler, decide
from warren_cron.worker.later import Later
from warren_cron.worker.longrun import Attempt, LongRuns
from warren_cron.worker.overlap import run_guarded
from warren_cron.worker.registry import Registry
from warren_cron.worker.settings import WorkerSettings
from warren_cron.worker.subscription import Subscription

#: The log line of a long worker that consumes.
READY = "long worker ready"
registry = Registry()


def note(ctx: TaskContext, event: str, **more: Any) -> None:
    """Append one line about ``ctx``'s attempt to the ledger file."""
    # ``instance`` tells apart two attempts of one run with one number in one process.
    line = {"run": ctx.run_id, "event": event, "pid": os.getpid(), "attempt": ctx.attempt}
    line["instance"] = id(ctx)
    with open(os.environ["LONG_LEDGER"], "a") as out:
        out.write(json.dumps({**line, "t": time.time(), **more}) + "\n")


@registry.task("long_sleep", heartbeat=1)
async def long_sleep(payload: dict[str, Any], ctx: TaskContext) -> None:
    """Run ``seconds``, heartbeating every ``beat`` seconds with how far it got."""
    note(ctx, "start")
    steps = int(payload["seconds"] / payload["beat"])
    for done in range(steps):
        ctx.heartbeat({"done": done, "of": steps})
        note(ctx, "beat", done=done)
        await asyncio.sleep(payload["beat"])
    note(ctx, "end")


@registry.task("hangs_once", heartbeat=0.5)
async def hangs_once(payload: dict[str, Any], ctx: TaskContext) -> None:
    """Heartbeat once, then hang on the first attempt; succeed on the next."""
    note(ctx, "start")
    ctx.heartbeat({"done": 0})
    if ctx.attempt == 1:
        await asyncio.Event().wait()
    note(ctx, "end")


def progress_line(event: dict[str, Any]) -> None:
    """Print a history event the long attempts wrote, as a line of its own."""
    print(orjson.dumps({"history": event}).decode(), flush=True)


class LongWorker:
    """Consumes the main queue and runs each task long, watched by its declared heartbeat."""

    def __init__(self, settings: WorkerSettings, settler: Settler, cancels: Cancels) -> None:
        self.settings, self.settler, self.cancels = settings, settler, cancels
        self.names = Names(settings.namespace)
        self.long = LongRuns(settings, emit=progress_line)
        self.long.use(registry)

    async def on_delivery(self, acks: Acks, delivered: DeliveredMessage) -> None:
        """Run one delivery as a long attempt and settle its fate as the worker does."""
        message = Delivery(delivered, acks)
        envelope = decode(message)
        attempt = attempt_number(message.headers, self.names.main_queue)
        ctx = TaskContext(
            run_id=envelope.run_id,
            task=envelope.task,
            schedule=envelope.schedule,
            scheduled_for=envelope.scheduled_for,
            attempt=attempt,
            redelivered=message.redelivered,
            timeout_seconds=self.settings.timeout_for(envelope.timeout_seconds),
        )

        async def run() -> Result:
            return await run_attempt(registry, envelope, ctx)

        async def guarded() -> Result:
            return await run_guarded(self.settings, envelope, ctx, run)

        result = await self.scoped(message, envelope, ctx, guarded)
        settle_on, attempt = self.long.settling(message, ctx.attempt)
        verdict = decide(result, message.routing_key)
        await self.settler.settle(settle_on, verdict, attempt, envelope.run_id)
        print(json.dumps({"event": "settled", "run": envelope.run_id, "reason": result.reason}))

    async def scoped(
        self, message: Delivery, envelope: Envelope, ctx: TaskContext, attempt: Attempt
    ) -> Result:
        """Run the long attempt as the worker's pipeline does: a cancel stops it."""
        scope = self.cancels.scope(envelope)
        if scope.stopped is not None:
            return scope.result()
        async with scope:
            return await self.long.run(message, envelope, ctx, attempt)
        return scope.result()  # reached only when the scope took the cancel


async def serve(settings: WorkerSettings) -> None:
    """Consume until killed."""
    consume = await connect(settings, "long-worker-consume")
    publish = await connect(settings, "long-worker-publish")
    channel = await consume.channel()
    await channel.set_qos(prefetch_count=4)
    names = Names(settings.namespace)
    await declare_topology(channel, names, settings)
    publisher = await publish_channel(publish)
    dlx = await publisher.get_exchange(names.dlx, ensure=False)
    cancels = Cancels(names)
    await cancels.start(settings)
    later = Later(publisher, names, settings.queue_type)
    worker = LongWorker(settings, Settler(dlx, later, publisher.ready), cancels)
    subscription = Subscription(channel, names.main_queue, worker.on_delivery)

    async def redeclare() -> None:
        await declare_topology(await consume.channel(), names, settings)

    await subscription.start(redeclare)
    print(READY, flush=True)
    await asyncio.Event().wait()


def main() -> None:
    """Entry point of ``python -m tests.long_worker``."""
    settings = load_settings(WorkerSettings)
    configure_logging(settings.log_level, settings.log_format)
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
