#!/usr/bin/env python3
"""The whole job in half a minute: the scheduler fires examples/schedules.toml, a worker runs it.

Runs in its own namespace (``warren_demo``) with retry delays of 500 ms, 1 s and 2 s, so a new
user sees fires, retries, a recovery and tasks failing for good. It prints every attempt, a
summary per schedule, what landed in the failed queue, the status table and one failed run's
story from the run history, then deletes the namespace unless ``--keep``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from aio_pika.abc import AbstractIncomingMessage

from warren_cron.broker.connect import connect
from warren_cron.faultkit.processes import WARREN
from warren_cron.names import Names
from warren_cron.ops.namespace import NamespaceInUse, delete
from warren_cron.runtime.settings import CronSettings, load_settings

ROOT = Path(__file__).resolve().parent.parent
#: Where the services' logs go; two demos at once (the test suite on two brokers) each need
#: their own.
LOGS = Path(os.environ.get("WARREN_DEMO_LOGS") or ROOT / ".demo")
NAMESPACE = "warren_demo"
SCHEDULES = ROOT / "examples" / "schedules.toml"
DEMO_ENV = {
    "CRON_NAMESPACE": NAMESPACE,
    "CRON_SCHEDULES_FILE": str(SCHEDULES),
    "CRON_MAX_RETRIES": "3",
    "CRON_RETRY_DELAY_MS": "500",
    "CRON_RETRY_DELAY_MULTIPLIER": "2",
    "CRON_HANDLER_MODULES": "examples.demo_handlers",
    "CRON_LOG_FORMAT": "json",
    "CRON_SHUTDOWN_GRACE_SECONDS": "5",
}
#: After the scheduler stops, how long retries already in flight may finish.
DRAIN_SECONDS = 4.0
#: Where the monitor serves the dashboard, unless the port is taken (then any free one).
DASHBOARD_PORT = 8088


def dashboard_port() -> int:
    """CRON_DASHBOARD_PORT if set, else 8088 when free, else a free port."""
    given = os.environ.get("CRON_DASHBOARD_PORT")
    if given:
        return int(given)
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", DASHBOARD_PORT))
        except OSError:
            probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Service:
    """One process of the demo, its command and its log file."""

    name: str
    args: list[str]
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def log(self) -> Path:
        """Where the process writes its JSON log."""
        return LOGS / f"{self.name}.log"

    def start(self) -> None:
        """Start the process, logging to its file."""
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, *self.args], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT
            )

    def stop(self) -> None:
        """SIGTERM, then wait for a clean exit."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(30)

    def events(self, name: str | None = None) -> Iterator[dict[str, Any]]:
        """The JSON log events of the process (all, or those with this message)."""
        if not self.log.exists():
            return
        for line in self.log.read_bytes().splitlines():
            with suppress(orjson.JSONDecodeError):
                event = orjson.loads(line)
                if isinstance(event, dict) and (name is None or event.get("event") == name):
                    yield event


#: Started in this order, stopped in reverse: the scheduler last in, first out, so the
#: worker is consuming before the first fire and still there for the last retry.
SERVICES = [
    Service("worker", [WARREN, "worker"]),
    Service("scheduler", [WARREN, "scheduler"]),
    Service("monitor", [WARREN, "monitor"]),
]


def by_name(name: str) -> Service:
    """The demo service called ``name``."""
    return next(service for service in SERVICES if service.name == name)


def run_services(seconds: float, keep: bool) -> None:
    """Start every service, report progress for ``seconds``, then stop them in order (with
    ``keep``, the monitor stays up: it serves the dashboard)."""
    LOGS.mkdir(parents=True, exist_ok=True)
    try:
        for service in SERVICES:
            service.start()
        started = time.monotonic()
        while (elapsed := time.monotonic() - started) < seconds:
            time.sleep(min(5.0, seconds - elapsed))
            print(f"  {time.monotonic() - started:4.0f}s  {progress()}", flush=True)
    finally:
        for service in reversed(SERVICES):
            if keep and service.name == "monitor":
                continue
            service.stop()
            if service.name == "scheduler":
                time.sleep(DRAIN_SECONDS)


def progress() -> str:
    """Counts so far: fires published and attempts by outcome."""
    fires = sum(1 for _ in by_name("scheduler").events("fire published"))
    outcomes = Counter(e["outcome"] for e in by_name("worker").events("attempt"))
    counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items()))
    return f"{fires} fires published; attempts: {counts or 'none yet'}"


def print_attempts() -> None:
    """One line per attempt, from the worker's log."""
    print(f"\n{'run id':38} {'attempt':>7} {'outcome':14} reason / error")
    for event in by_name("worker").events("attempt"):
        detail = event["reason"] + (f": {event['error']}" if event.get("error") else "")
        print(f"{event['run_id']:38} {event['attempt']:>7} {event['outcome']:14} {detail[:60]}")


def print_summary() -> None:
    """Per schedule: fires, attempts and how they ended."""
    fires = Counter(e["schedule"] for e in by_name("scheduler").events("fire published"))
    outcomes: dict[str, Counter[str]] = defaultdict(Counter)
    for event in by_name("worker").events("attempt"):
        outcomes[event["schedule"] or "-"][event["outcome"]] += 1
    columns = ["succeeded", "retrying", "failed", "lock-contended"]
    print(f"\n{'schedule':12} {'fires':>5} " + " ".join(f"{c:>14}" for c in columns))
    for name in sorted(set(fires) | set(outcomes)):
        counts = " ".join(f"{outcomes[name][c]:>14}" for c in columns)
        print(f"{name:12} {fires[name]:>5} {counts}")


async def failed_records(settings: CronSettings) -> list[AbstractIncomingMessage]:
    """Peek at the failed queue (messages are returned to it, not removed)."""
    async with await connect(settings, "warren-demo-peek") as connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(Names(settings.namespace).failed_queue, passive=True)
        records = []
        while (message := await queue.get(fail=False)) is not None:
            records.append(message)
        return records


def print_failed(records: list[AbstractIncomingMessage]) -> None:
    """What an operator finds in the failed queue."""
    print(f"\nfailed queue ({len(records)} tasks, kept for replay):")
    for record in records:
        h: dict[str, Any] = dict(record.headers)
        print(f"  {h.get('cron-run-id')}: {h.get('cron-reason')} after {h.get('cron-attempts')}")


async def delete_namespace(settings: CronSettings) -> None:
    """Remove the demo's queues, streams and exchanges, as ``warren namespace delete``."""
    try:
        found = await delete(settings)
    except NamespaceInUse as error:
        print(f"\nnamespace {NAMESPACE} kept: warren processes are {error}")
        return
    print(f"\nnamespace {NAMESPACE} deleted ({len(found.deleted)} queues, streams and exchanges)")


def print_monitor() -> None:
    """What the monitor logged (and would alert on with CRON_ALERT_WEBHOOK_URL set)."""
    seen = list(by_name("monitor").events("task failed"))
    print(f"\nmonitor: {len(seen)} failed task(s) logged as ERROR")
    for event in seen:
        print(f"  {event.get('run_id')}: {event.get('reason')} after {event.get('attempts')}")


def print_story(records: list[AbstractIncomingMessage]) -> None:
    """What an operator asks first: every schedule's state, and the whole story of a failed run."""
    # The services stopped before this table: without saying so, its "scheduler: DOWN" line
    # reads like a fault of the demo.
    print(
        "\nstatus (warren status, after the demo stopped its worker, scheduler and monitor: "
        "the scheduler line reads DOWN for that reason):",
        flush=True,
    )
    subprocess.run([WARREN, "status"], cwd=ROOT, check=False)
    if records:
        run_id = str((records[0].headers or {}).get("cron-run-id"))
        print(f"\nstory of one failed run (warren history show {run_id}):", flush=True)
        subprocess.run([WARREN, "history", "show", run_id], cwd=ROOT, check=False)


def shown(path: Path) -> str:
    """``path`` relative to the checkout when it lies inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main() -> int:
    """Run the demo; exit 0 when it showed fires, a retry and a failure."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", action="store_true", help="keep the demo namespace")
    parser.add_argument("--seconds", type=float, default=30, help="how long the scheduler runs")
    args = parser.parse_args()
    os.environ.update(DEMO_ENV)
    os.environ["CRON_DASHBOARD_PORT"] = str(dashboard_port())
    settings = load_settings(CronSettings)
    print(
        f"running {', '.join(s.name for s in SERVICES)} for {args.seconds:g}s on {SCHEDULES.name}"
    )
    print(f"namespace {NAMESPACE}, default retry plan {settings.default_plan().key}")
    dashboard = f"http://127.0.0.1:{os.environ['CRON_DASHBOARD_PORT']}/"
    print(f"dashboard: {dashboard} (open it while the demo runs)", flush=True)
    run_services(args.seconds, args.keep)
    records = asyncio.run(failed_records(settings))
    print_attempts()
    print_summary()
    print_failed(records)
    print_monitor()
    print_story(records)
    if not args.keep:
        asyncio.run(delete_namespace(settings))
    print(f"\nlogs: {', '.join(shown(s.log) for s in SERVICES)}")
    monitor = by_name("monitor").process
    if args.keep and monitor is not None:
        print(f"dashboard still up: {dashboard} (stop it with: kill {monitor.pid})")
    outcomes = {e["outcome"] for e in by_name("worker").events("attempt")}
    return 0 if {"succeeded", "retrying"} <= outcomes and records else 1


if __name__ == "__main__":
    sys.exit(main())
