"""``status``: ``warren status`` over a day of history of 1,000 schedules firing every minute.

The history stream gets, for each minute of a day and each schedule, its ``fired`` and
``attempt`` events (one schedule in a hundred failing every run, with its ``failed`` event):
about 2.9 million events, published as stream messages of 500 events each, as the
processes' history publishers send them. The monitor (``warren monitor``) folds
the stream and stores its fold; that takes as long as it takes and is reported. With the
monitor stopped and a fresh minute of events appended after its fold, ``python
warren status --json`` is timed from process start to exit, as a user runs it, against
the target of 3 s. ``--cold`` also times one run without the monitor's fold, which folds
the whole stream.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aio_pika
import orjson

from benchlib.common import DEFAULTS, ROOT, Bench, Run, cron_env, print_table, reap
from benchlib.scheduling import schedules_text, start
from warren_cron.clock import utc_text
from warren_cron.faultkit.processes import WARREN
from warren_cron.faultkit.waits import until
from warren_cron.history.events import encode, event
from warren_cron.history.snapshot import read_fold
from warren_cron.history.stream import declare_history

TARGET_SECONDS = 3.0
#: Events per stream message, as ``HistoryPublisher`` sends them.
CHUNK = 500
#: Messages awaiting their confirm at once while the stream is filled.
IN_FLIGHT = 64
HOST = {"host": "bench-worker", "pid": 4242}


def every_minute(index: int, moment: datetime) -> str:
    """Each benchmark schedule fires every minute."""
    return 'every = "1m"'


def minute_events(count: int, fire: datetime) -> list[dict[str, Any]]:
    """The events of one minute: each schedule's fire and attempt, and the failures."""
    events = []
    ended = fire + timedelta(milliseconds=350)
    for index in range(count):
        name = f"s{index}"
        ids = {"run_id": f"{name}@{utc_text(fire)}", "schedule": name, "task": "noop"}
        events.append(event("fired", at=fire, **ids, scheduled_for=utc_text(fire), plan="1s"))
        failing = index % 100 == 0
        outcome = "failed" if failing else "succeeded"
        error = "RuntimeError: the bench said no" if failing else None
        attempt = {"attempt": 1, "outcome": outcome, "reason": outcome, "duration_ms": 12.5}
        events.append(event("attempt", at=ended, **ids, **attempt, error=error, **HOST))
        if failing:
            events.append(event("failed", at=ended, **ids, reason="handler-error", attempts=1))
    return events


def history(count: int, minutes: int, first: datetime) -> Iterator[bytes]:
    """Stream message bodies of ``minutes`` minutes of events from ``first`` on."""
    batch: list[dict[str, Any]] = []
    for minute in range(minutes):
        batch += minute_events(count, first + timedelta(minutes=minute))
        while len(batch) >= CHUNK:
            yield encode(batch[:CHUNK])
            del batch[:CHUNK]
    if batch:
        yield encode(batch)


async def fill(bench: Bench, bodies: Iterator[bytes]) -> tuple[int, int]:
    """Publish the bodies to the history stream, confirmed; returns messages and bytes."""
    connection = await aio_pika.connect(bench.url)
    async with connection:
        await declare_history(connection, bench.names, DEFAULTS)
        channel = await connection.channel(publisher_confirms=True)
        stream = bench.names.history_stream
        messages = size = 0
        pending: list[Any] = []
        for body in bodies:
            message = aio_pika.Message(body, delivery_mode=aio_pika.DeliveryMode.PERSISTENT)
            pending.append(channel.default_exchange.publish(message, stream))
            messages, size = messages + 1, size + len(body)
            if len(pending) >= IN_FLIGHT:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    return messages, size


def per_minute(count: int) -> int:
    """Events of one minute of ``count`` schedules: a fire and an attempt each, and failures."""
    return 2 * count + len(range(0, count, 100))


async def drop_fold(bench: Bench) -> None:
    """Delete the monitor's fold, as if no monitor had ever run."""
    connection = await aio_pika.connect(bench.url)
    async with connection:
        channel = await connection.channel()
        await channel.queue_delete(bench.names.status_queue)


async def folded_to(bench: Bench) -> int:
    """The stream offset the monitor's stored fold covers; -1 without a fold."""
    connection = await aio_pika.connect(bench.url)
    async with connection:
        fold = await read_fold(connection, bench.names)
    return -1 if fold is None else fold.offset


def monitor_fold(bench: Bench, env: dict[str, str], last: int, workdir: Path) -> Run:
    """Start the monitor, wait until its stored fold covers offset ``last``, stop it."""
    started = time.monotonic()
    process = start(["-m", "warren_cron.monitor"], bench, workdir / "status-monitor.log", **env)
    until(lambda: asyncio.run(folded_to(bench)) >= last, 1800, interval=0.5)
    seconds = time.monotonic() - started
    cpu, rss = reap(process)
    return Run(seconds, 0, cpu, rss)


def timed_status(env: dict[str, str], rows: int) -> float:
    """Seconds of one ``warren status --json``, from start to exit."""
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, WARREN, "status", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        timeout=600,
    )
    seconds = time.monotonic() - started
    if result.returncode != 0 or len(orjson.loads(result.stdout)) != rows:
        raise RuntimeError(f"warren status exited {result.returncode}: {result.stderr[-2000:]!r}")
    return seconds


def status(args: argparse.Namespace, bench: Bench, workdir: Path) -> dict[str, Any]:
    """warren status with the monitor's fold and a fresh tail, against the 3 s target."""
    path = workdir / "status-schedules.toml"
    path.write_text(schedules_text(args.schedules, every_minute, datetime.now(UTC)))
    env = cron_env(bench, CRON_SCHEDULES_FILE=str(path), CRON_LOG_LEVEL="WARNING")
    first = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=args.minutes)
    filling = time.monotonic()
    messages, size = asyncio.run(fill(bench, history(args.schedules, args.minutes, first)))
    fill_seconds = time.monotonic() - filling
    monitor = monitor_fold(bench, env, messages - 1, workdir)
    tail = history(args.schedules, 1, first + timedelta(minutes=args.minutes))
    asyncio.run(fill(bench, tail))
    runs = [timed_status(env, args.schedules) for _ in range(args.rounds)]
    cold = []
    if args.cold:
        asyncio.run(drop_fold(bench))
        cold.append(timed_status(env, args.schedules))
    events = (args.minutes + 1) * per_minute(args.schedules)
    print_table(
        f"warren status --json: {args.schedules:,} schedules, {args.minutes:,} minutes of history "
        f"(~{events / 1e6:.1f} M events, {size / 1e6:,.0f} MB in {messages:,} messages)",
        [
            ("warren status seconds", runs),
            ("ratio to the 3 s target", [r / TARGET_SECONDS for r in runs]),
            ("fill: events/s", [events / fill_seconds]),
            ("monitor to stored fold, s", [monitor.seconds]),
            ("monitor fold: events/s", [events / monitor.seconds]),
            ("monitor CPU s", [monitor.cpu_seconds]),
            ("monitor peak RSS MB", [monitor.peak_rss_mb]),
            *([("warren status without a fold: s", cold)] if cold else []),
        ],
    )
    return {
        "seconds": statistics.median(runs),
        "ratio_to_target": statistics.median(runs) / TARGET_SECONDS,
        "events": events,
        "monitor_fold_seconds": monitor.seconds,
        "monitor_peak_rss_mb": monitor.peak_rss_mb,
    }


def add_command(sub: Any) -> None:
    """The ``status`` subcommand and its options."""
    command = sub.add_parser("status", help=status.__doc__)
    command.add_argument("--schedules", type=int, default=1000)
    command.add_argument("--minutes", type=int, default=1440, help="minutes of history")
    command.add_argument("--cold", action="store_true", help="also time a run without a fold")
