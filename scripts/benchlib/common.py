"""What every benchmark shares: a namespace of its own, child processes, figures and tables."""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import aio_pika
import orjson
from aio_pika.abc import AbstractConnection
from pydantic import JsonValue

from warren_cron.broker.exclusive import plain_connection
from warren_cron.clock import utcnow
from warren_cron.declare import declare_topology
from warren_cron.delay import delay_objects
from warren_cron.envelope import Envelope
from warren_cron.faultkit.waits import until
from warren_cron.names import FINAL_KEY, Names
from warren_cron.plan import RetryPlan
from warren_cron.publish import TaskPublisher
from warren_cron.runtime.settings import CronSettings

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_URL = "amqp://guest:guest@127.0.0.1:5672/"
ATTEMPT_MARK = b'"event":"attempt"'
#: A benchmark's processes get none of the caller's CRON_ variables (``cron_env`` drops them),
#: so they run on the defaults, and the queue type the benchmark declares its queues with.
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

    @property
    def steady_per_s(self) -> float:
        """Tasks per second from the first task's end to the last's: start-up left out."""
        return (self.tasks - 1) / self.extra["steady_seconds"]


def summary(values: Sequence[float]) -> str:
    """``median (min-max)`` of one figure over the rounds; ratios get two decimals."""
    spec = ",.2f" if max(values) < 10 else ",.1f"
    return f"{statistics.median(values):{spec}} ({min(values):{spec}}-{max(values):{spec}})"


def int_list(text: str) -> list[int]:
    """A comma-separated list of numbers from the command line: ``32,100``."""
    return [int(item) for item in text.split(",")]


def print_table(title: str, rows: list[tuple[str, list[float]]]) -> None:
    """A small fixed-width table: figure, median (min-max)."""
    print(f"\n{title}")
    for label, values in rows:
        print(f"  {label:28} {summary(values)}")


# --- the broker side ------------------------------------------------------------------------


class Bench:
    """A namespace of the benchmark's own on the broker."""

    def __init__(self, url: str, settings: CronSettings = DEFAULTS) -> None:
        self.url = url  # one node, or a cluster's nodes comma-separated
        self.names = Names(f"bench_{uuid.uuid4().hex[:8]}")
        self.plan_keys: set[str] = set()
        #: Scheduler partitions a benchmark ran with: their locks and watermarks go too.
        self.partitions = 1
        #: The schedulers' ``CRON_LEADER_RETRY_SECONDS`` (``bench.py schedules``).
        self.leader_retry = 0.2
        #: What the benchmark declares with; its processes get the same queue type.
        self.settings = settings.model_copy(update={"amqp_url": url})

    async def connection(self) -> AbstractConnection:
        """A plain connection to the (first answering) node."""
        return await plain_connection(self.settings, "bench", heartbeat=60)

    async def fill(self, count: int, task: str, plan: RetryPlan, payload: JsonValue = None) -> None:
        """Publish ``count`` persistent tasks, confirmed, before any consumer starts."""
        self.plan_keys.update(step.key for step in plan.suffixes())
        connection = await self.connection()
        async with connection:
            channel = await connection.channel()
            topology = await declare_topology(channel, self.names, self.settings)
            kind = self.settings.queue_type
            publisher = TaskPublisher(channel, topology.tasks, self.names, kind)
            now = utcnow()
            for start in range(0, count, 500):
                await asyncio.gather(
                    *(
                        publisher.publish(
                            Envelope(task=task, run_id=f"b{i}", scheduled_for=now, payload=payload),
                            plan,
                        )
                        for i in range(start, min(start + 500, count))
                    )
                )

    async def delete(self) -> None:
        """Remove every queue and exchange of the namespace."""
        names = self.names
        queues, exchanges = names.queues(self.plan_keys), names.exchanges
        queues += names.partition_queues(self.partitions)
        delay_queues, delay_exchanges = delay_objects(names, {*self.plan_keys, FINAL_KEY})
        connection = await self.connection()
        async with connection:
            channel = await connection.channel()
            for queue in queues + delay_queues:
                await channel.queue_delete(queue)
            for exchange in exchanges + delay_exchanges:
                await channel.exchange_delete(exchange)


async def open_queue(
    url: str, queue_name: str, prefetch: int
) -> tuple[aio_pika.abc.AbstractConnection, aio_pika.abc.AbstractQueue]:
    """A baseline's connection and its queue, at ``prefetch``."""
    connection = await aio_pika.connect(url)
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=prefetch)
    return connection, await channel.declare_queue(queue_name, passive=True)


# --- processes ------------------------------------------------------------------------------


def cron_env(bench: Bench, **extra: str) -> dict[str, str]:
    """Environment of a project process in the benchmark's namespace, INFO JSON logs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRON_")}
    env.update(
        CRON_AMQP_URL=bench.url,
        CRON_QUEUE_TYPE=bench.settings.queue_type,
        CRON_NAMESPACE=bench.names.namespace,
        CRON_LOG_LEVEL="INFO",
        CRON_LOG_FORMAT="json",
    )
    env.update(extra)
    return env


#: The settings that turn on the circuit breaker and the retry budget (``--flow``).
FLOW_ENV = {"CRON_BREAKER_ENABLED": "true", "CRON_RETRY_BUDGET_ENABLED": "true"}


def worker_env(
    bench: Bench, prefetch: int, modules: str = "", extra: dict[str, str] | None = None
) -> dict[str, str]:
    """Environment of ``warren worker`` in the benchmark's namespace, INFO JSON logs."""
    env = cron_env(bench, CRON_PREFETCH=str(prefetch), CRON_HANDLER_MODULES=modules)
    return {**env, **(extra or {})}


def run_ours(
    bench: Bench,
    expected: int,
    prefetch: int,
    modules: str,
    workdir: Path,
    extra: dict[str, str] | None = None,
) -> Run:
    """Start ``warren worker`` (with ``extra`` settings); clock from process start to its
    last attempt line."""
    log = workdir / f"worker-{uuid.uuid4().hex[:6]}.log"
    with log.open("wb") as out:
        started = time.time()
        process = subprocess.Popen(
            [sys.executable, "-m", "warren_cron.worker"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=worker_env(bench, prefetch, modules, extra),
        )
        attempts = LineCounter(log)
        until(lambda: attempts() >= expected or process.poll() is not None, 600)
    ended = last_attempt_time(log)
    cpu, rss = reap(process)
    steady = ended - attempt_time(log, first=True)
    return Run(ended - started, expected, cpu, rss, {"steady_seconds": steady})


#: Baselines run as ``python -m benchlib.X``: they need scripts/ and the project root.
SEARCH_PATH = os.pathsep.join((str(ROOT / "scripts"), str(ROOT)))


def run_baseline(command: list[str], expected: int) -> Run:
    """Start a baseline that prints the time it finished its last task (after the time it
    finished its first, if it tells); clock from its start."""
    started = time.time()
    process = subprocess.Popen(
        [sys.executable, *command],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": SEARCH_PATH},
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    *first, ended = (float(t) for t in process.stdout.readline().split())
    cpu, rss = reap(process)
    steady = {"steady_seconds": ended - first[0]} if first else {}
    return Run(ended - started, expected, cpu, rss, steady)


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
    return attempt_time(log, first=False)


def attempt_time(log: Path, first: bool) -> float:
    """Wall-clock time of the first or the last attempt line in the log."""
    lines = log.read_bytes().splitlines()
    for line in lines if first else reversed(lines):
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
