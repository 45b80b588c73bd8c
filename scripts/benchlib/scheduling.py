"""Schedules files, scheduler and worker processes, and their logs, for the scheduler benchmarks."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aio_pika
import orjson

from benchlib.common import DEFAULTS, ROOT, Bench, LineCounter, cron_env, reap
from warren_cron.declare import declare_topology
from warren_cron.faultkit.waits import until
from warren_cron.plan import RetryPlan

#: Every benchmark schedule uses this one-step plan, so one retry queue is declared.
PLAN_ENV = {"CRON_MAX_RETRIES": "1", "CRON_RETRY_DELAY_MS": "1000"}
PLAN = RetryPlan((1000,))
PUBLISHED = b'"event":"fire published"'
ATTEMPT = b'"event":"attempt"'
LEADING = b'"event":"leading"'
WORKER_STARTED = b'"event":"worker started"'


def toml_time(moment: datetime) -> str:
    """A TOML offset date-time in UTC, with milliseconds when it has any."""
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    millis = moment.microsecond // 1000
    return f"{text}.{millis:03d}Z" if millis else f"{text}Z"


def entry(name: str, timing: str) -> str:
    """One ``[[schedule]]`` table running ``noop``."""
    return f'[[schedule]]\nname = "{name}"\n{timing}\ntask = "noop"\n'


def schedules_text(count: int, timing: Any, moment: datetime) -> str:
    """A schedules file of ``count`` entries named ``s<i>``, timed by ``timing(i, moment)``."""
    return "\n".join(entry(f"s{i}", timing(i, moment)) for i in range(count))


def start(args: list[str], bench: Bench, log: Path, **env: str) -> subprocess.Popen[bytes]:
    """Start ``python <args>`` in the repository root, its output appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, *args],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=cron_env(bench, **PLAN_ENV, **env),
        )


def events(log: Path, mark: bytes) -> list[dict[str, Any]]:
    """The JSON log lines that contain ``mark``."""
    try:
        lines = log.read_bytes().splitlines()
    except FileNotFoundError:
        return []
    return [orjson.loads(line) for line in lines if mark in line]


def start_scheduler(
    bench: Bench, schedules: Path, log: Path, timeout: float, **env: str
) -> subprocess.Popen[bytes]:
    """Start the scheduler; returns the process once it leads."""
    process = start(
        ["-m", "warren_cron.scheduler"], bench, log, CRON_SCHEDULES_FILE=str(schedules), **env
    )
    try:
        leading = LineCounter(log, LEADING)
        until(lambda: leading() > 0 or process.poll() is not None, timeout)
    except TimeoutError:
        reap(process)
        raise
    if process.poll() is not None:
        raise RuntimeError(f"the scheduler exited {process.returncode}; see {log}")
    return process


def start_worker(bench: Bench, log: Path, prefetch: int) -> subprocess.Popen[bytes]:
    """Start ``warren worker`` (``noop`` is built in); returns once it consumes."""
    process = start(["-m", "warren_cron.worker"], bench, log, CRON_PREFETCH=str(prefetch))
    until(lambda: LineCounter(log, WORKER_STARTED)() > 0, 60)
    return process


def leading_partitions(log: Path) -> set[int]:
    """The partitions a scheduler said last that it leads."""
    said = events(log, b'"event":"leading partitions"')
    return set(said[-1]["partitions"]) if said else set()


def spread_over(logs: list[Path], count: int) -> bool:
    """Every one of ``count`` partitions led once, each scheduler leading some and none
    more than its share (``scheduler/shares.py``: 16 over three are led 6, 6 and 4)."""
    shares = [leading_partitions(log) for log in logs]
    sizes = [len(share) for share in shares]
    led = sorted(p for share in shares for p in share)
    return led == list(range(count)) and 0 < min(sizes) <= max(sizes) <= -(-count // len(logs))


async def reset(bench: Bench) -> None:
    """Empty the main queue and drop the watermarks, so every round starts alike."""
    connection = await aio_pika.connect(bench.url)
    async with connection:
        channel = await connection.channel()
        topology = await declare_topology(channel, bench.names, DEFAULTS)
        await topology.main.purge()
        await channel.queue_delete(bench.names.watermark_queue)
        for partition in range(bench.partitions if bench.partitions > 1 else 0):
            queue = bench.names.partition_watermark_queue(partition, bench.partitions)
            await channel.queue_delete(queue)
