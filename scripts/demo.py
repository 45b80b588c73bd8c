#!/usr/bin/env python3
"""The main job end to end: a worker runs tasks that succeed, recover, and fail for good.

Runs in its own namespace (``warren_demo``) with short retry delays, prints every attempt
and what landed in the failed queue, then deletes the namespace unless ``--keep``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aio_pika
import orjson

from topology.amqp import connect, publish_channel
from topology.declare import declare_topology
from topology.envelope import Envelope, one_off_run_id, utcnow
from topology.names import Names
from topology.publish import TaskPublisher
from topology.settings import CronSettings, load_settings

ROOT = Path(__file__).resolve().parent.parent
NAMESPACE = "warren_demo"
DEMO_ENV = {
    "CRON_NAMESPACE": NAMESPACE,
    "CRON_MAX_RETRIES": "3",
    "CRON_RETRY_DELAY_MS": "500",
    "CRON_RETRY_DELAY_MULTIPLIER": "2",
    "CRON_HANDLER_MODULES": "examples.demo_handlers",
    "CRON_LOG_FORMAT": "json",
}
TASKS: list[tuple[str, Any]] = [
    ("greet", {"name": "operator"}),
    ("flaky", {"fail_attempts": 2}),
    ("broken", {}),
    ("http", {"url": "http://127.0.0.1:{port}/missing"}),
    ("http", {"url": "http://127.0.0.1:{port}/ok"}),
]


@contextmanager
def local_endpoint() -> Iterator[int]:
    """A tiny webhook: /ok answers 200, anything else 404."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(200 if self.path == "/ok" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()


def envelopes(port: int) -> list[Envelope]:
    """One envelope per demo task, the webhook port filled in."""
    result = []
    for name, payload in TASKS:
        text = orjson.dumps(payload).decode().replace("{port}", str(port))
        result.append(
            Envelope(
                task=name,
                payload=orjson.loads(text),
                run_id=one_off_run_id(name),
                scheduled_for=utcnow(),
            )
        )
    return result


async def publish_all(settings: CronSettings, items: list[Envelope]) -> None:
    """Publish the demo tasks with the default plan."""
    names = Names(settings.namespace)
    async with await connect(settings, "warren-demo") as connection:
        channel = await publish_channel(connection)
        topology = await declare_topology(channel, names, settings.queue_type, 10)
        publisher = TaskPublisher(channel, topology.tasks, names, settings.queue_type)
        for envelope in items:
            await publisher.publish(envelope, settings.default_plan())


async def failed_records(settings: CronSettings) -> list[aio_pika.abc.AbstractIncomingMessage]:
    """Peek at the failed queue (messages are requeued, not removed)."""
    async with await connect(settings, "warren-demo-peek") as connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(Names(settings.namespace).failed_queue, passive=True)
        records = []
        while (message := await queue.get(fail=False)) is not None:
            records.append(message)
        return records


async def delete_namespace(settings: CronSettings) -> None:
    """Remove the demo's queues and exchanges."""
    names = Names(settings.namespace)
    plan_keys = [step.key for step in settings.default_plan().suffixes()]
    queues = [names.main_queue, names.failed_queue, names.monitor_queue]
    queues += [names.retry_queue(key) for key in plan_keys]
    async with await connect(settings, "warren-demo-cleanup") as connection:
        channel = await connection.channel()
        for queue in queues:
            await channel.queue_delete(queue)
        for exchange in (names.tasks_exchange, names.dlx, names.unrouted_exchange):
            await channel.exchange_delete(exchange)


def print_attempts(log_file: Path) -> None:
    """One line per attempt, from the worker's JSON log."""
    print(f"\n{'run id':52} {'task':8} {'attempt':>7} {'outcome':10} reason / error")
    for line in log_file.read_bytes().splitlines():
        with suppress(orjson.JSONDecodeError):
            event = orjson.loads(line)
            if event.get("event") == "attempt":
                detail = event["reason"] + (f": {event['error']}" if event.get("error") else "")
                print(
                    f"{event['run_id']:52} {event['task'] or '-':8} {event['attempt']:>7} "
                    f"{event['outcome']:10} {detail[:70]}"
                )


def print_failed(records: list[aio_pika.abc.AbstractIncomingMessage]) -> None:
    """What an operator finds in the failed queue."""
    print(f"\nfailed queue ({len(records)} tasks, kept for replay):")
    for record in records:
        h: dict[str, Any] = dict(record.headers)
        print(
            f"  {h.get('cron-run-id')}: {h.get('cron-reason')} after {h.get('cron-attempts')} "
            f"attempt(s), {len(h.get('cron-x-death') or [])} x-death entries"
        )


async def wait_settled(settings: CronSettings, expected_failed: int, timeout: float) -> None:
    """Wait until the expected number of tasks reached the failed queue."""
    async with asyncio.timeout(timeout):
        while len(await failed_records(settings)) < expected_failed:
            await asyncio.sleep(0.5)
    await asyncio.sleep(1.0)  # let the last successes be logged


def main() -> int:
    """Run the demo; exit 0 when every task ended as expected."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", action="store_true", help="keep the demo namespace")
    args = parser.parse_args()
    os.environ.update(DEMO_ENV)
    settings = load_settings(CronSettings)
    log_file = ROOT / ".demo" / "worker.log"
    log_file.parent.mkdir(exist_ok=True)
    with local_endpoint() as port, log_file.open("wb") as log:
        worker = __import__("subprocess").Popen(
            [sys.executable, "-m", "worker"], cwd=ROOT, stdout=log, stderr=log
        )
        try:
            print(
                f"worker started (pid {worker.pid}); publishing {len(TASKS)} tasks, "
                f"retry plan {settings.default_plan().key}"
            )
            asyncio.run(publish_all(settings, envelopes(port)))
            asyncio.run(wait_settled(settings, expected_failed=2, timeout=30))
            records = asyncio.run(failed_records(settings))
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.wait(30)
    print_attempts(log_file)
    print_failed(records)
    if not args.keep:
        asyncio.run(delete_namespace(settings))
    print(f"\nworker log: {log_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
