"""A private RabbitMQ node for chaos runs and fault tests: stopped, killed and frozen on purpose.

It runs from the installed ``rabbitmq-server`` with its own node name, ports, data, logs and
Erlang cookie, a ``consumer_timeout`` of a few seconds and short heartbeats, so breaking it
never touches the machine's shared broker.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

from chaoslib.waits import NeverHappened, until

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"
CONSUMER_TIMEOUT_MS = 4000
HEARTBEAT_SECONDS = 2


class BrokerNodeError(RuntimeError):
    """The private node did not start or stop as asked."""


def available() -> bool:
    """True when this machine can run a private node."""
    return Path(SERVER).exists() and Path(CTL).exists()


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateBroker:
    """One RabbitMQ node of the test run's own."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.node = f"warren_t{uuid.uuid4().hex[:6]}@localhost"
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/"
        self._process: subprocess.Popen[bytes] | None = None
        self._write_config()

    def _write_config(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        (self.base / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\n"
            "loopback_users = none\n"
            f"consumer_timeout = {CONSUMER_TIMEOUT_MS}\n"
            f"heartbeat = {HEARTBEAT_SECONDS}\n"
        )
        # The consumer timeout is checked on each channel tick (60 s by default), and quorum
        # queues report their length to list_queues on each of their ticks (5 s by default):
        # chaos runs and fault tests read it to know when nothing is left in flight.
        (self.base / "advanced.config").write_text(
            "[{rabbit, [{channel_tick_interval, 500}, {quorum_tick_interval, 500}]}].\n"
        )
        (self.base / "enabled_plugins").write_text("[].\n")
        (self.base / "rabbitmq-env.conf").write_text("ERL_EPMD_ADDRESS=127.0.0.1\n")

    def env(self) -> dict[str, str]:
        """Environment for the server and rabbitmqctl of this node only."""
        base = str(self.base)
        return {
            **os.environ,
            "HOME": base,  # its own Erlang cookie
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(free_port()),
            "RABBITMQ_MNESIA_BASE": f"{base}/mnesia",
            "RABBITMQ_LOG_BASE": f"{base}/log",
            "RABBITMQ_CONFIG_FILE": f"{base}/rabbitmq",
            "RABBITMQ_ADVANCED_CONFIG_FILE": f"{base}/advanced.config",
            "RABBITMQ_ENABLED_PLUGINS_FILE": f"{base}/enabled_plugins",
            "RABBITMQ_PID_FILE": f"{base}/pid",
            "RABBITMQ_CONF_ENV_FILE": f"{base}/rabbitmq-env.conf",
        }

    def start(self, timeout: float = 60) -> None:
        """Start the node and wait until it accepts AMQP connections."""
        if self.is_running():
            return
        with (self.base / "server.out").open("ab") as log:
            self._process = subprocess.Popen([SERVER], env=self.env(), stdout=log, stderr=log)
        self._wait_for(lambda: self._answers(), timeout, "start")

    def stop(self) -> None:
        """Stop the node cleanly (messages on disk survive)."""
        if self._process is None:
            return
        self.ctl("stop")
        self._reap()

    def restart(self) -> None:
        """Stop, then start again."""
        self.stop()
        self.start()

    def kill(self) -> None:
        """``kill -9`` the Erlang VM: the crash a power cut would cause."""
        pid = self.beam_pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        self._reap()

    def sync_metadata(self) -> None:
        """Flush the metadata log: a queue declared under ~1 s ago may not survive kill -9."""
        self.ctl("eval", "mnesia:sync_log().")

    def freeze(self) -> None:
        """``kill -STOP`` the VM: the node stops answering, even heartbeats."""
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """``kill -CONT`` a frozen VM."""
        self._signal(signal.SIGCONT)

    def ctl(self, *args: str, timeout: float = 60) -> str:
        """Run ``rabbitmqctl`` against this node; return its output."""
        result = subprocess.run(
            [CTL, "-n", self.node, *args],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise BrokerNodeError(f"rabbitmqctl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def beam_pid(self) -> int | None:
        """OS pid of the node's Erlang VM, if it runs."""
        try:
            return int((self.base / "pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def is_running(self) -> bool:
        """True while the node's start script is alive."""
        return self._process is not None and self._process.poll() is None

    def remove(self) -> None:
        """Stop the node whatever state it is in and delete its files."""
        if self.is_running():
            self.thaw()
            try:
                self.stop()
            except (BrokerNodeError, subprocess.TimeoutExpired):
                self.kill()
        shutil.rmtree(self.base, ignore_errors=True)

    def _signal(self, sig: signal.Signals) -> None:
        pid = self.beam_pid()
        if pid is not None:
            os.kill(pid, sig)

    def _reap(self) -> None:
        if self._process is not None:
            try:
                self._process.wait(30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
            self._process = None
        (self.base / "pid").unlink(missing_ok=True)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), 0.5):
                pass
        except OSError:
            return False
        # The port opens before the node accepts logins: ask the node itself.
        try:
            self.ctl("await_startup", "--timeout", "5", timeout=15)
        except (BrokerNodeError, subprocess.TimeoutExpired):
            return False
        return True

    def _wait_for(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        def answered_or_exited() -> bool:
            return ready() or (self._process is not None and self._process.poll() is not None)

        with contextlib.suppress(NeverHappened):
            until(answered_or_exited, timeout, interval=0.25)
        if ready():
            return
        tail = (self.base / "server.out").read_text(errors="replace")[-2000:]
        raise BrokerNodeError(f"private RabbitMQ node did not {what}:\n{tail}")
