"""``dashboard``: each page of the dashboard with 1,000 schedules and 10,000 failed records.

The history stream gets an hour of events of the schedules (fires and attempts, one schedule
in a hundred failing), the failed queue 10,000 records; the monitor then serves the
dashboard, and each page is fetched ``--rounds`` times over HTTP, timed from request to the
last byte, against the target of 300 ms. Side by side: reading the whole failed queue once,
what a page would cost if it read the store of record on each request instead of the
monitor's index.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aio_pika

from benchlib.common import DEFAULTS, Bench, print_table, reap
from benchlib.scheduling import schedules_text, start
from benchlib.status import every_minute, fill, history
from warren_cron.clock import utc_text
from warren_cron.declare import declare_topology
from warren_cron.failed.export import restored_message
from warren_cron.failed.select import RecordFilter
from warren_cron.failed.store import read_records
from warren_cron.faultkit.waits import until

TARGET_SECONDS = 0.3
PORT = 18_088


def record(index: int, schedules: int, now: datetime) -> dict[str, Any]:
    """One exported failed record (as ``warren failed export`` writes it) of schedule ``s<n>``."""
    name = f"s{index % schedules}"
    at = now - timedelta(seconds=index)
    run_id = f"{name}@bench-{index}"
    return {
        "run_id": run_id,
        "reason": "handler-error" if index % 3 else "retries-exhausted",
        "attempts": 4,
        "error": f"RuntimeError: the bench said no ({index})",
        "failed_at": at.isoformat(),
        "routing_key": "final",
        "headers": {"cron-schedule": name},
        "body": f'{{"task": "noop", "run_id": "{run_id}", "schedule": "{name}"}}',
    }


async def fill_failed(bench: Bench, count: int, schedules: int) -> None:
    """Publish ``count`` records to the failed queue, confirmed."""
    connection = await aio_pika.connect(bench.url)
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        await declare_topology(channel, bench.names, DEFAULTS)
        now = datetime.now(UTC)
        for first in range(0, count, 500):
            batch = range(first, min(first + 500, count))
            await asyncio.gather(
                *(
                    channel.default_exchange.publish(
                        restored_message(record(i, schedules, now)), bench.names.failed_queue
                    )
                    for i in batch
                )
            )


async def read_whole_queue(bench: Bench) -> float:
    """Seconds to read every failed record once, as a page would without the index."""
    connection = await aio_pika.connect(bench.url)
    async with connection:
        started = time.monotonic()
        await read_records(connection, bench.names, RecordFilter())
        return time.monotonic() - started


def fetch(url: str) -> tuple[float, bytes]:
    """Seconds to GET ``url`` to its last byte, and the body."""
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=30) as answer:  # noqa: S310 - our own http URL
        body = answer.read()
    return time.monotonic() - started, body


def indexed(base: str, count: int) -> bool:
    """True once the failed page counts every record."""
    try:
        return f"({count:,} in all)".replace(",", "") in fetch(base + "failed")[1].decode()
    except OSError:
        return False


def pages(schedules: int, first: datetime, minutes: int) -> dict[str, str]:
    """The pages timed, by label; the run is one of the history, the record one of the queue."""
    old = f"s1@{utc_text(first + timedelta(minutes=30))}"
    recent = f"s1@{utc_text(first + timedelta(minutes=minutes - 1))}"
    failed_id = record(0, schedules, datetime.now(UTC))["run_id"]
    return {
        "/ (overview)": "",
        "/schedules": "schedules",
        "/schedules page 10": "schedules?page=10",
        "/runs": "runs",
        "/runs/<id> (a recent run)": f"runs/{recent}",
        "/runs/<id> (30 min old, stream)": f"runs/{old}",
        "/failed": "failed",
        "/failed filtered, page 3": "failed?reason=handler-error&text=s1&page=3",
        "/failed/record": f"failed/record?run_id={failed_id}",
        "/failed/confirm (count)": "failed/confirm?action=replay&reason=handler-error",
    }


def dashboard(args: argparse.Namespace, bench: Bench, workdir: Path) -> dict[str, Any]:
    """Each page's time with 1,000 schedules and 10,000 failed records, against 300 ms."""
    path = workdir / "dashboard-schedules.toml"
    path.write_text(schedules_text(args.schedules, every_minute, datetime.now(UTC)))
    first = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=args.minutes)
    asyncio.run(fill(bench, history(args.schedules, args.minutes, first)))
    asyncio.run(fill_failed(bench, args.records, args.schedules))
    naive = [asyncio.run(read_whole_queue(bench)) for _ in range(args.rounds)]
    env = {"CRON_SCHEDULES_FILE": str(path), "CRON_DASHBOARD_PORT": str(PORT)}
    started = time.monotonic()
    monitor = start(["-m", "warren_cron.monitor"], bench, workdir / "dashboard-monitor.log", **env)
    base = f"http://127.0.0.1:{PORT}/"
    try:
        until(lambda: indexed(base, args.records), 600, interval=0.5)
        ready = time.monotonic() - started
        timed = {
            label: [fetch(base + url)[0] for _ in range(args.rounds)]
            for label, url in pages(args.schedules, first, args.minutes).items()
        }
    finally:
        reap(monitor)
    worst = max(statistics.median(values) for values in timed.values())
    print_table(
        f"dashboard pages: {args.schedules:,} schedules, {args.records:,} failed records, "
        f"{args.minutes} minutes of history",
        [
            *((f"{label} ms", [v * 1000 for v in values]) for label, values in timed.items()),
            ("slowest page / 300 ms target", [worst / TARGET_SECONDS]),
            ("read the failed queue once, ms", [v * 1000 for v in naive]),
            ("monitor start to index read, s", [ready]),
        ],
    )
    return {
        "pages_ms": {label: statistics.median(v) * 1000 for label, v in timed.items()},
        "slowest_ratio_to_target": worst / TARGET_SECONDS,
        "read_whole_failed_queue_ms": statistics.median(naive) * 1000,
        "index_ready_seconds": ready,
    }


def add_command(sub: Any) -> None:
    """The ``dashboard`` subcommand and its options."""
    command = sub.add_parser("dashboard", help=dashboard.__doc__)
    command.add_argument("--schedules", type=int, default=1000)
    command.add_argument("--records", type=int, default=10_000)
    command.add_argument("--minutes", type=int, default=60, help="minutes of history")
