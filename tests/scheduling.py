"""Helpers of the scheduler and overlap tests: settings, schedules files, processes, logs."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from tests.namespace import TestBroker
from warren_cron import codec
from warren_cron.envelope import Envelope
from warren_cron.faultkit.waits import eventually
from warren_cron.scheduler.service import Scheduler
from warren_cron.scheduler.settings import SchedulerSettings
from warren_cron.scheduler.watermark import Watermark
from warren_cron.schedules.load import ScheduleSet, load_schedules, parse_schedules

ROOT = Path(__file__).resolve().parent.parent


def scheduler_settings(broker: TestBroker, path: Path, **overrides: Any) -> SchedulerSettings:
    """Scheduler settings for the test's namespace, with quick failover."""
    values: dict[str, Any] = {
        "namespace": broker.names.namespace,
        "amqp_url": broker.url,
        "schedules_file": path,
        "leader_retry_seconds": 0.2,
        "schedules_poll_seconds": 0,
        "log_format": "console",
    }
    values.update(overrides)
    return SchedulerSettings(**values)


def write_schedules(broker: TestBroker, path: Path, text: str) -> ScheduleSet:
    """Write a schedules file, validate it, and register its plans for cleanup."""
    path.write_text(text, encoding="utf-8")
    schedules = parse_schedules(text, scheduler_settings(broker, path), str(path))
    for schedule in schedules.schedules:
        broker.plan_keys.update(step.key for step in schedule.plan.suffixes())
    return schedules


async def published(broker: TestBroker) -> list[tuple[Any, Envelope]]:
    """Every message in the main queue with its decoded envelope, oldest first."""
    messages = await broker.get_all(broker.names.main_queue)
    return [(message, codec.decode(message)) for message in messages]


async def fire_times(broker: TestBroker, schedule: str | None = None) -> list[datetime]:
    """Scheduled times of the published fires (of one schedule), in publish order."""
    return [
        env.scheduled_for
        for _, env in await published(broker)
        if schedule is None or env.schedule == schedule
    ]


async def wait_published(broker: TestBroker, count: int, timeout: float = 15) -> None:
    """Wait until the main queue holds at least ``count`` fires, for as long as fires keep
    coming; fail once none came for ``timeout`` seconds."""
    await broker.wait_depth(broker.names.main_queue, count, timeout)


def env_for(broker: TestBroker, **extra: str) -> dict[str, str]:
    """Environment of a subprocess in the test's namespace, logging JSON."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRON_")}
    env.update(
        CRON_NAMESPACE=broker.names.namespace,
        CRON_AMQP_URL=broker.url,
        CRON_LOG_FORMAT="json",
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


def partitioned(path: Path, count: int, heartbeat: float) -> dict[str, str]:
    """A scheduler's settings for ``count`` partitions of the schedules in ``path``, with
    quick beats and failover (the lease is twice ``heartbeat``)."""
    return {
        "CRON_SCHEDULES_FILE": str(path),
        "CRON_SCHEDULER_PARTITIONS": str(count),
        "CRON_LEADER_RETRY_SECONDS": "0.2",
        "CRON_SCHEDULER_HEARTBEAT_SECONDS": str(heartbeat),
        "CRON_SCHEDULER_BEAT_SECONDS": "0.5",
        "CRON_SCHEDULES_POLL_SECONDS": "0",
    }


def evenly_led(shares: list[set[int]], count: int) -> bool:
    """Every one of ``count`` partitions in exactly one share, each within one of the others."""
    every = sorted(p for share in shares for p in share)
    sizes = [len(share) for share in shares]
    return every == list(range(count)) and max(sizes) - min(sizes) <= 1


class Process:
    """A project process whose JSON log lines are collected as they come."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.events: list[dict[str, Any]] = []
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, args: list[str], env: dict[str, str]) -> Process:
        """Start ``python <args>`` in the repository root."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *args,
            cwd=ROOT,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        return cls(proc)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            with suppress(orjson.JSONDecodeError):
                event = orjson.loads(line)
                if isinstance(event, dict):
                    self.events.append(event)

    def named(self, event: str) -> list[dict[str, Any]]:
        """Log events with this message."""
        return [e for e in self.events if e.get("event") == event]

    async def wait_event(self, event: str, count: int = 1, timeout: float = 15) -> None:
        """Wait until the process logged ``event`` at least ``count`` times."""

        def logged() -> bool:
            if self.proc.returncode is not None:
                raise AssertionError(f"process exited {self.proc.returncode}: {self.events}")
            return len(self.named(event)) >= count

        await eventually(logged, timeout, what=f"{event!r} x{count}")

    async def stop(self, timeout: float = 15) -> int:
        """SIGTERM, then wait for the exit code and the last log lines."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            last = "\n".join(str(event) for event in self.events[-20:])
            raise AssertionError(
                f"no exit {timeout:g}s after SIGTERM; last lines:\n{last}"
            ) from None
        await asyncio.wait_for(self._reader, timeout)
        return code

    async def kill(self) -> None:
        """SIGKILL: the process dies without closing anything."""
        self.proc.kill()
        await self.proc.wait()
        await self._reader


class Spawner:
    """Starts processes for one test and kills, by their own handles, any left running."""

    def __init__(self) -> None:
        self.started: list[Process] = []

    async def __call__(self, args: list[str], env: dict[str, str]) -> Process:
        """Start a process and remember it."""
        process = await Process.start(args, env)
        self.started.append(process)
        return process

    async def kill_all(self) -> None:
        """Kill every process of the test that is still running."""
        for process in self.started:
            if process.proc.returncode is None:
                await process.kill()


class Schedulers:
    """In-process schedulers on the test's namespace."""

    def __init__(self, broker: TestBroker) -> None:
        self.broker = broker
        self.tasks: dict[int, tuple[Scheduler, asyncio.Task[None]]] = {}

    async def start(self, path: Path, **overrides: Any) -> Scheduler:
        """Start a scheduler on ``path`` and wait until it leads."""
        settings = scheduler_settings(self.broker, path, **overrides)
        instance = Scheduler(settings, load_schedules(path, settings))
        task = asyncio.create_task(instance.run())
        self.tasks[id(instance)] = (instance, task)
        leading = asyncio.create_task(instance.leading.wait())
        await asyncio.wait({leading, task}, timeout=15, return_when=asyncio.FIRST_COMPLETED)
        if task.done():
            task.result()
        return instance

    async def stop(self, instance: Scheduler) -> None:
        """Stop a scheduler and wait until it closed its connection."""
        instance.stop()
        await asyncio.wait_for(self.tasks.pop(id(instance))[1], 15)


def every(name: str, interval: str, **fields: Any) -> str:
    """A [[schedule]] table running ``noop`` at an interval."""
    extra = "".join(f"{key} = {value}\n" for key, value in fields.items())
    return f'[[schedule]]\nname = "{name}"\nevery = "{interval}"\ntask = "noop"\n{extra}'


async def store_watermark(broker: TestBroker, moment: datetime) -> None:
    """Leave a watermark as a previous leader would have."""
    channel = await broker.channel()
    watermark = Watermark(channel, broker.names, "classic")
    await watermark.declare()
    await watermark.write(moment)
    await channel.close()
