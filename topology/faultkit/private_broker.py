"""A private RabbitMQ node for chaos runs and fault tests: stopped, killed and frozen on purpose.

It runs from the installed ``rabbitmq-server`` (3.x) or from a RabbitMQ 4.0 or 4.3 root in a
chroot (``warren_cron.faultkit.install``). Either way it has its own node name, ports, data, logs
and Erlang cookie, a ``consumer_timeout`` of a few seconds and short heartbeats, so breaking it
never touches the machine's shared broker.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from warren_cron.faultkit.erlcall import DEPTHS, depths, erl_call
from warren_cron.faultkit.install import CTL, SERVER, BrokerNodeError, Install, release
from warren_cron.faultkit.login import logs_in
from warren_cron.faultkit.waits import NeverHappened, until

CONSUMER_TIMEOUT_MS = 4000
HEARTBEAT_SECONDS = 2
#: RabbitMQ's own defaults, for a node people keep using after the script that started it.
LASTING_CONSUMER_TIMEOUT_MS = 1_800_000
LASTING_HEARTBEAT_SECONDS = 60
#: How long a silent peer stays in a cluster: short, so isolating a node takes seconds.
NET_TICKTIME_SECONDS = 8
#: Where private nodes listen: above the machine's node (5672, 15672, 25672), below the
#: kernel's ephemeral ports.
NODE_PORTS = (26000, 32000)
#: Seconds a clean stop may take (queues flushed, connections closed) before the VM is killed.
STOP_SECONDS = 90
#: Seconds a started node's default vhost may stay down (recovering) before it is restarted.
VHOST_PATIENCE = 45.0
#: How long ``serving`` waits for a login before it makes a node anew: past a vhost restart.
RENEW_AFTER_SECONDS = VHOST_PATIENCE + 45.0


class BrokerNode(Protocol):
    """What a scenario needs of its broker: a private node, or a private cluster."""

    url: str  # one node's URL, or every node's, comma-separated (as CRON_AMQP_URL)

    def ctl(self, *args: str, timeout: float = 60) -> str:
        """``rabbitmqctl`` against the broker."""
        ...

    def sync_metadata(self) -> None:
        """Make every declaration so far survive a ``kill -9``."""
        ...

    def depths(self) -> dict[str, int]:
        """Messages (ready and unacked) of every queue, by name."""
        ...

    def victim(self, rng: random.Random) -> PrivateBroker:
        """The node a broker fault stops or kills: this node, or one of the cluster's."""
        ...


def holding(node: BrokerNode) -> str:
    """The broker's queues that hold messages, with their leader: where a stuck task waits."""
    table = node.ctl("list_queues", "name", "messages", "messages_ready", "leader", "-q")
    return "\n".join(line for line in table.splitlines() if "\t0\t0\t" not in line)


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def node_port() -> int:
    """A free port for a private node, below the kernel's ephemeral ports (32768 and up on
    Linux): a port from that range, free while its node is stopped, may become an outgoing
    connection's own port, and the node could not start there again (eaddrinuse)."""
    while True:
        port = NODE_PORTS[0] + secrets.randbelow(NODE_PORTS[1] - NODE_PORTS[0])
        if port in _HANDED_OUT:
            continue  # free now, but a node made earlier listens there once it starts
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port


#: Every port ``node_port`` gave this process: the nodes of a cluster pick their ports before
#: any of them starts (one node's distribution port was another's, and it did not start).
_HANDED_OUT: set[int] = set()


class PrivateBroker:
    """One RabbitMQ node of the test run's own.

    ``install`` picks the release (default: ``WARREN_RABBITMQ``); nodes of a cluster share
    a ``cookie`` directory (their ``HOME``), a lone node keeps its cookie in its data dir.
    A ``lasting`` node (the one scripts start for people to use, on a given ``port``) keeps
    RabbitMQ's own timeouts and runs in a session of its own: it outlives the process that
    started it and a Ctrl-C in that process's terminal.
    """

    def __init__(
        self,
        base: Path,
        install: Install | None = None,
        cookie: str | None = None,
        *,
        port: int | None = None,
        lasting: bool = False,
        management: bool = False,
    ) -> None:
        self.install = install or Install.of(release())
        self.base, self.inner = self.install.place(base)
        self.home = cookie or self.inner
        self.port = port or node_port()
        self.dist_port = node_port()
        self.lasting = lasting
        self.node = (
            f"warren{port}@localhost" if port else f"warren_t{uuid.uuid4().hex[:6]}@localhost"
        )
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/"
        self._process: subprocess.Popen[bytes] | None = None
        self._vhost_down_since: float | None = None
        self._vhost_revivals = 0  # tries to bring a down vhost back since it was last up
        self.consumer_timeout_ms = LASTING_CONSUMER_TIMEOUT_MS if lasting else CONSUMER_TIMEOUT_MS
        #: The management API's port, when the node runs the plugin (some seconds more to start).
        self.api_port = node_port() if management else None
        self._write_config()

    def _write_config(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        (self.base / "rabbitmq.conf").write_text(
            f"listeners.tcp.default = 127.0.0.1:{self.port}\n"
            "loopback_users = none\n"
            f"consumer_timeout = {self.consumer_timeout_ms}\n"
            f"heartbeat = {LASTING_HEARTBEAT_SECONDS if self.lasting else HEARTBEAT_SECONDS}\n"
            + (
                f"management.tcp.ip = 127.0.0.1\nmanagement.tcp.port = {self.api_port}\n"
                if self.management_url
                else ""
            )
        )
        # The consumer timeout is checked on each channel tick (60 s by default), and quorum
        # queues report their length to list_queues on each of their ticks (5 s by default):
        # chaos runs and fault tests read it to know when nothing is left in flight.
        (self.base / "advanced.config").write_text(
            "[{rabbit, [{channel_tick_interval, 500}, {quorum_tick_interval, 500}]},\n"
            f" {{kernel, [{{net_ticktime, {NET_TICKTIME_SECONDS}}}]}}].\n"
        )
        plugins = "rabbitmq_management" if self.management_url else ""
        (self.base / "enabled_plugins").write_text(f"[{plugins}].\n")
        (self.base / "rabbitmq-env.conf").write_text("ERL_EPMD_ADDRESS=127.0.0.1\n")

    @property
    def management_url(self) -> str | None:
        """The management API's URL, when the node runs the plugin."""
        return f"http://127.0.0.1:{self.api_port}/" if self.api_port else None

    def env(self) -> dict[str, str]:
        """Environment for the server and rabbitmqctl of this node only."""
        base = self.inner
        return {
            **os.environ,
            "HOME": self.home,  # the Erlang cookie: its own, or its cluster's
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_MNESIA_BASE": f"{base}/mnesia",
            "RABBITMQ_LOG_BASE": f"{base}/log",
            "RABBITMQ_CONFIG_FILE": f"{base}/rabbitmq",
            "RABBITMQ_ADVANCED_CONFIG_FILE": f"{base}/advanced.config",
            "RABBITMQ_ENABLED_PLUGINS_FILE": f"{base}/enabled_plugins",
            "RABBITMQ_PID_FILE": f"{base}/pid",
            "RABBITMQ_CONF_ENV_FILE": f"{base}/rabbitmq-env.conf",
        }

    def start(self, timeout: float = 180) -> None:
        """Start the node and wait until it accepts AMQP connections."""
        if self.is_running():
            return
        self._spawn()
        try:
            self._wait_for(lambda: self._answers(), timeout, "start")
        except BrokerNodeError:
            self.kill()  # a node that never answered is not left running behind the error
            raise

    def _spawn(self) -> None:
        with (self.base / "server.out").open("ab") as log:
            self._process = subprocess.Popen(
                self.install.command(SERVER),
                env=self.env(),
                cwd=self.base,  # where Erlang drops what no setting places, removed with the node
                stdout=log,
                stderr=log,
                start_new_session=self.lasting,
            )

    def stop(self) -> None:
        """Stop the node cleanly (messages on disk survive), as ``rabbitmqctl stop`` does."""
        if self._process is None:
            return
        # What rabbitmqctl stop asks of the node, without its Erlang VM (a CPU-second a call,
        # and fault tests stop nodes again and again). Spawned: the node halts before any
        # answer could come back.
        self.call("spawn(fun() -> rabbit:stop_and_halt() end), ok.")
        self._reap(STOP_SECONDS)

    def restart(self) -> None:
        """Stop, then start again."""
        self.stop()
        self.start()

    def serving(self, timeout: float = RENEW_AFTER_SECONDS) -> None:
        """Start the node if it is not running, and make sure a login gets in: a node whose
        default vhost stays down (RabbitMQ 4.3.6, seen after a kill -9 and after a freeze:
        its metadata store's recovery failed and ``restart_vhost`` did not bring it back) is
        made anew, so that one test's broken broker does not fail the tests after it."""
        try:
            self.start()
            until(lambda: logs_in(self.url) or self._answers(), timeout, interval=0.5)
        except (BrokerNodeError, NeverHappened):
            self.renew()

    def renew(self) -> None:
        """Kill the node, delete its data (queues, messages, metadata) and start it again."""
        if self.is_running():
            self.kill()
        shutil.rmtree(self.base / "mnesia", ignore_errors=True)
        self._vhost_seen_up()
        self.start()

    def kill(self) -> None:
        """``kill -9`` the Erlang VM: the crash a power cut would cause."""
        pid = self.beam_pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
        self._reap()

    def set_consumer_timeout(self, ms: int) -> None:
        """The broker's ``consumer_timeout`` for channels opened from now on, restarts too."""
        self.consumer_timeout_ms = ms
        self._write_config()
        if self.is_running():
            self.call(f"application:set_env(rabbit, consumer_timeout, {ms}).")

    def victim(self, _rng: random.Random) -> PrivateBroker:
        """A lone node is the one a broker fault breaks."""
        return self

    def sync_metadata(self) -> None:
        """Flush what a ``kill -9`` would lose of declarations made in the last seconds.

        Mnesia's log holds the queue records (on Khepri, 4.3, it answers "not running" and
        Raft already keeps them on disk); Ra's dets tables (its server directory and the
        per-server term and vote) are saved every 0.5-5 s: a quorum queue declared since then
        comes back from a kill -9 without a leader, and whatever is routed to it waits forever.
        """
        self.call("mnesia:sync_log(), [dets:sync(T) || T <- dets:all()].")

    def depths(self) -> dict[str, int]:
        """Messages (ready and unacked) of every queue, by name."""
        return depths(self.call(DEPTHS))

    def freeze(self) -> None:
        """``kill -STOP`` the VM: the node stops answering, even heartbeats."""
        self._signal(signal.SIGSTOP)

    def thaw(self) -> None:
        """``kill -CONT`` a frozen VM."""
        self._signal(signal.SIGCONT)

    def ctl(self, *args: str, timeout: float = 60) -> str:
        """Run ``rabbitmqctl`` against this node; return its output."""
        result = subprocess.run(
            self.install.command(CTL, "-n", self.node, *args),
            env=self.env(),
            cwd=self.base,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if result.returncode != 0:
            raise BrokerNodeError(f"rabbitmqctl {' '.join(args)}: {result.stderr.strip()}")
        return result.stdout

    def call(self, expression: str, timeout: float = 60) -> str:
        """Evaluate an Erlang ``expression`` on this node (``erl_call``: no VM of its own)."""
        cookie = self.install.outside(self.home) / ".erlang.cookie"
        return erl_call(self.install, self.node, cookie, expression, timeout)

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
            self._halt()
        shutil.rmtree(self.base, ignore_errors=True)

    def _halt(self) -> None:
        # A clean stop, or kill -9 when the node does not answer it.
        try:
            self.stop()
        except (BrokerNodeError, subprocess.TimeoutExpired):
            self.kill()

    def _signal(self, sig: signal.Signals) -> None:
        pid = self.beam_pid()
        if pid is not None:
            os.kill(pid, sig)

    def _reap(self, seconds: float = 30) -> None:
        if self._process is not None:
            try:
                self._process.wait(seconds)
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
        # The port opens before the node's boot ends: ask the node itself.
        try:
            if self.call("rabbit:await_startup(node(), false, 5000).", timeout=60) != "ok":
                return False
        except (BrokerNodeError, subprocess.TimeoutExpired):
            return False
        # A login says the default vhost runs without another Erlang VM for rabbitmqctl; only
        # a vhost that keeps refusing it is asked about (and restarted if recovery failed).
        if logs_in(self.url):
            self._vhost_seen_up()
            return True
        with contextlib.suppress(BrokerNodeError, subprocess.TimeoutExpired):
            self._vhost_up()
        return False

    def _vhost_up(self) -> bool:
        """True once the default vhost runs. After a kill -9 on a loaded machine its message
        store's recovery can take long, or fail and leave the vhost down for good, every
        login refused (``Connection.Close`` at open): one still down ``VHOST_PATIENCE``
        seconds after it was first seen down is restarted, as an operator would."""
        alive = self.call('rabbit_vhost_sup_sup:is_vhost_alive(<<"/">>).', timeout=15)
        if alive.strip().endswith("true"):
            self._vhost_seen_up()
            return True
        now = time.monotonic()
        if self._vhost_down_since is None:
            self._vhost_down_since = now
        elif now - self._vhost_down_since > VHOST_PATIENCE:
            self._revive_vhost()
            self._vhost_down_since = time.monotonic()
        return False

    def _vhost_seen_up(self) -> None:
        self._vhost_down_since, self._vhost_revivals = None, 0

    def _revive_vhost(self) -> None:
        # First as an operator would, restart_vhost; when that did not bring it back (RabbitMQ
        # 4.3.6, after a clean restart in CI), the node itself, its data kept; and so on.
        if self._vhost_revivals % 2 == 0:
            self.ctl("restart_vhost", "/", timeout=60)
        else:
            self._halt()
            self._spawn()
        self._vhost_revivals += 1

    def _wait_for(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        # The last answer is kept, not asked again: asking costs a rabbitmqctl call, which on
        # a loaded machine can take longer than its own timeout and fail a node that is up.
        answered = False

        def answered_or_exited() -> bool:
            nonlocal answered
            answered = ready()
            return answered or (self._process is not None and self._process.poll() is not None)

        with contextlib.suppress(NeverHappened):
            until(answered_or_exited, timeout, interval=0.25)
        if answered:
            return
        tail = (self.base / "server.out").read_text(errors="replace")[-2000:]
        raise BrokerNodeError(f"private RabbitMQ node did not {what}:\n{tail}{self._log_tail()}")

    def _log_tail(self) -> str:
        """The node's own log where it first said something of a vhost at error level (why
        the vhost went down), and its end: the node's folder is deleted with the test."""
        logs = sorted((self.base / "log").glob("*.log"), key=lambda path: path.stat().st_size)
        if not logs:
            return ""
        text = logs[-1].read_text(errors="replace")
        cause = re.search(r"^.*\[error\].*vhost.*$", text, re.MULTILINE | re.IGNORECASE)
        first = f"{text[cause.start() : cause.start() + 5000]}\n...\n" if cause else ""
        return f"\n--- {logs[-1].name}:\n{first}{text[-3000:]}"
