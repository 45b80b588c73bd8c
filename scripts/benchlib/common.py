"""What every benchmark shares: a namespace of its own, child processes, figures and tables."""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import aio_pika
import orjson

from topology.declare import declare_topology
from topology.envelope import Envelope, utcnow
from topology.names import Names
from topology.plan import RetryPlan
from topology.publish import TaskPublisher
from topology.runtime.settings import CronSettings

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"
ATTEMPT_MARK = b'"event":"attempt"'
#: A benchmark's processes get no queue setting (``cron_env`` drops every CRON_ variable but its
#: own), so they run on the defaults: the benchmark declares its queues with the same.
DEFAULTS = CronSettings.model_construct()


@dataclass
class Run:
    """What one contender did in one round."""

    seconds: float
    tasks: int
    cpu_seconds: float = 0.0
    peak_rss_mb: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)

    @property
    def per_s(self) -> float:
        """Tasks (or attempts) per second."""
        return self.tasks / self.seconds


def summary(values: Sequence[float]) -> str:
    """``median (min-max)`` of one figure over the rounds; ratios get two decimals."""
    spec = ",.2f" if max(values) < 10 else ",.1f"
    return f"{statistics.median(values):{spec}} ({min(values):{spec}}-{max(values):{spec}})"


def print_table(title: str, rows: list[tuple[str, list[float]]]) -> None:
    """A small fixed-width table: figure, median (min-max)."""
    print(f"\n{title}")
    for label, values in rows:
        print(f"  {label:28} {summary(values)}")


# --- the broker side ------------------------------------------------------------------------


class Bench:
    """A namespace of the benchmark's own on the broker."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.names = Names(f"bench_{uuid.uuid4().hex[:8]}")
        self.plan_keys: set[str] = set()

    async def fill(self, count: int, task: str, plan: RetryPlan) -> None:
        """Publish ``count`` persistent tasks, confirmed, before any consumer starts."""
        self.plan_keys.update(step.key for step in plan.suffixes())
        connection = await aio_pika.connect(self.url)
        async with connection:
            channel = await connection.channel()
            topology = await declare_topology(channel, self.names, DEFAULTS)
            publisher = TaskPublisher(channel, topology.tasks, self.names, DEFAULTS.queue_type)
            now = utcnow()
            for start in range(0, count, 500):
                await asyncio.gather(
                    *(
                        publisher.publish(
                            Envelope(task=task, run_id=f"b{i}", scheduled_for=now), plan
                        )
                        for i in range(start, min(start + 500, count))
                    )
                )

    async def delete(self) -> None:
        """Remove every queue and exchange of the namespace."""
        names = self.names
        queues = [names.main_queue, names.failed_queue, names.monitor_queue]
        queues += [names.watermark_queue, names.leader_queue]
        queues += [names.history_stream, names.control_stream, names.status_queue]
        queues += [names.retry_queue(key) for key in self.plan_keys]
        connection = await aio_pika.connect(self.url)
        async with connection:
            channel = await connection.channel()
            for queue in queues:
                await channel.queue_delete(queue)
            for exchange in (names.tasks_exchange, names.dlx, names.unrouted_exchange):
                await channel.exchange_delete(exchange)


# --- processes ------------------------------------------------------------------------------


def cron_env(bench: Bench, **extra: str) -> dict[str, str]:
    """Environment of a project process in the benchmark's namespace, INFO JSON logs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRON_")}
    env.update(
        CRON_AMQP_URL=bench.url,
        CRON_NAMESPACE=bench.names.namespace,
        CRON_LOG_LEVEL="INFO",
        CRON_LOG_FORMAT="json",
    )
    env.update(extra)
    return env


def worker_env(bench: Bench, prefetch: int, modules: str = "") -> dict[str, str]:
    """Environment of ``python -m worker`` in the benchmark's namespace, INFO JSON logs."""
    return cron_env(bench, CRON_PREFETCH=str(prefetch), CRON_HANDLER_MODULES=modules)


class LineCounter:
    """Lines of a growing log that contain ``mark``, reading only what was added since the last
    look: a poll that reread the whole log every 20 ms would take CPU from what is measured."""

    def __init__(self, log: Path, mark: bytes = ATTEMPT_MARK) -> None:
        self.log = log
        self.mark = mark
        self._offset = 0
        self._count = 0
        self._partial = b""

    def __call__(self) -> int:
        """The count so far."""
        try:
            with self.log.open("rb") as file:
                file.seek(self._offset)
                chunk = file.read()
        except FileNotFoundError:
            return 0
        self._offset += len(chunk)
        data = self._partial + chunk
        end = data.rfind(b"\n") + 1
        self._count += data[:end].count(self.mark)
        self._partial = data[end:]
        return self._count


def reached(counter: LineCounter, count: int) -> Callable[[], bool]:
    """A check that ``counter`` has seen at least ``count`` lines."""
    return lambda: counter() >= count


def log_time(event: dict[str, object]) -> float:
    """Wall-clock time of one JSON log line, in seconds since the epoch."""
    return datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")).timestamp()


def last_attempt_time(log: Path) -> float:
    """Wall-clock time of the last attempt line in the log."""
    for line in reversed(log.read_bytes().splitlines()):
        if ATTEMPT_MARK in line:
            return log_time(orjson.loads(line))
    raise RuntimeError("no attempt in the log")


def reap(process: subprocess.Popen[bytes]) -> tuple[float, float]:
    """Stop a child, then return its CPU seconds and peak RSS in MB from wait4."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def rss_mb(pid: int) -> float:
    """Resident set size of a running process, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a running process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of stat(5), counted after the command name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
