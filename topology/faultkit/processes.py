"""Project processes run as operators run them, to be killed, stopped and restarted on purpose.

Each process logs to a file of its own (no pipe to fill up while nobody reads it); readiness
is a log line, so a test waits for the event instead of sleeping.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from warren_cron.faultkit.waits import NeverHappened, eventually

#: The ``warren`` console script installed beside the interpreter running this.
WARREN = str(Path(sys.executable).with_name("warren"))
_numbers = itertools.count(1)
#: The log line of a worker that has connected and consumes.
WORKER_READY = '"worker started"'


class ProcessError(RuntimeError):
    """A project process did not start or stop as expected."""


class Proc:
    """One project process (``warren worker`` and the like) with its log file."""

    def __init__(self, args: list[str], env: Mapping[str, str], logs: Path, ready: str) -> None:
        self.log_path = logs / f"{Path(args[-1]).stem}-{next(_numbers)}.log"
        self.ready_line = ready
        with self.log_path.open("wb") as out:
            self.popen = subprocess.Popen(
                [sys.executable, *args], env=dict(env), stdout=out, stderr=out
            )

    @property
    def pid(self) -> int:
        """OS process id."""
        return self.popen.pid

    def log(self) -> str:
        """Everything the process wrote so far."""
        return self.log_path.read_text(errors="replace")

    def count(self, text: str) -> int:
        """How many times ``text`` appears in the log."""
        return self.log().count(text)

    async def wait_log(self, text: str, count: int = 1, timeout: float = 30) -> None:
        """Wait until ``text`` appears ``count`` times in the log."""
        with contextlib.suppress(NeverHappened):
            # Until logged or exited: an exited process logs no more.
            await eventually(
                lambda: self.count(text) >= count or self.popen.poll() is not None, timeout
            )
        if self.count(text) < count:
            why = (
                f"exit code {self.popen.returncode}" if self.popen.poll() is not None else "timeout"
            )
            raise ProcessError(f"{text!r} x{count} not logged ({why}):\n{self.log()[-3000:]}")

    async def ready(self, timeout: float = 30) -> Proc:
        """Wait for the line that says the process is up; return self."""
        await self.wait_log(self.ready_line, timeout=timeout)
        return self

    def kill(self) -> None:
        """``kill -9``: no cleanup, no goodbye to the broker."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(10)

    async def terminate(self, timeout: float = 30) -> int:
        """SIGTERM, then wait for the exit code."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        return await self.wait(timeout)

    async def wait(self, timeout: float = 30) -> int:
        """Wait for the process to exit on its own; return its exit code."""
        await eventually(lambda: self.popen.poll() is not None, timeout, what="exit")
        return self.popen.returncode

    def alive(self) -> bool:
        """True while the process runs."""
        return self.popen.poll() is None


class Procs:
    """Every project process a test started; all are killed when the test ends."""

    def __init__(self, logs: Path, env: Mapping[str, str]) -> None:
        self.logs = logs
        self.env = dict(env)
        self.started: list[Proc] = []

    def spawn(self, args: list[str], ready: str, **extra: str) -> Proc:
        """Start ``python ARGS`` with the shared environment plus ``extra``."""
        proc = Proc(args, {**self.env, **extra}, self.logs, ready)
        self.started.append(proc)
        return proc

    async def worker(self, **extra: str) -> Proc:
        """A ``warren worker`` that has connected and consumes."""
        return await self.spawn(["-m", "warren_cron.worker"], WORKER_READY, **extra).ready()

    def kill_all(self) -> None:
        """``kill -9`` whatever still runs."""
        for proc in self.started:
            proc.kill()


def base_env(url: str, namespace: str, ledger: Path, queue_type: str = "classic") -> dict[str, str]:
    """Environment of a worker process on the private node, with the ledger tasks."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRON_")}
    env.update(
        CRON_AMQP_URL=url,
        CRON_NAMESPACE=namespace,
        CRON_QUEUE_TYPE=queue_type,
        CRON_HANDLER_MODULES="warren_cron.faultkit.worker_tasks",
        CRON_LOG_FORMAT="json",
        CRON_HEARTBEAT_SECONDS="2",
        CRON_CONSUMER_TIMEOUT_SECONDS="4",
        CRON_TASK_TIMEOUT_SECONDS="3",
        CRON_SHUTDOWN_GRACE_SECONDS="1",
        CRON_PREFETCH="8",
        WARREN_TEST_LEDGER=str(ledger),
        PYTHONUNBUFFERED="1",
    )
    return env
