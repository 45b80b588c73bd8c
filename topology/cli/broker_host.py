"""This machine, as ``broker_up`` sees it: probes, and the commands that bring a broker up."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from warren_cron.cli.broker_up import NoBroker, say
from warren_cron.faultkit.install import BrokerNodeError, Install, available
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.waits import NeverHappened, until

#: Compose waits for the health check (up to 30 tries, 5 s apart); pulling the image comes first.
COMPOSE_SECONDS = 600
INSTALL_SECONDS = 900
START_SECONDS = 90


class MachineHost:
    """The real machine; the project's own nodes live in ``PROJECT/.rabbitmq/PORT/``."""

    def __init__(self, project: Path) -> None:
        self.project = project.resolve()
        self.logs = self.project / ".rabbitmq"

    def answers(self, url: str) -> bool:
        """Something accepts connections at ``url`` (any node of a comma-separated list)."""
        return any(listening(one.strip()) for one in url.split(","))

    def docker_engine(self) -> bool:
        """``docker info`` and ``docker compose version`` both succeed."""
        if shutil.which("docker") is None:
            return False
        return all(quietly(["docker", *args], 20) for args in (["info"], ["compose", "version"]))

    def server_installed(self) -> bool:
        """The Debian layout of ``rabbitmq-server`` that private nodes run from is there."""
        return available()

    def is_root(self) -> bool:
        """Running as root."""
        return os.geteuid() == 0

    def platform(self) -> str:
        """``debian``, ``fedora``, ``macos`` or ``other``, from ``/etc/os-release``."""
        if sys.platform == "darwin":
            return "macos"
        try:
            release = Path("/etc/os-release").read_text().lower()
        except OSError:
            return "other"
        ids = {
            word.strip("\"'")
            for line in release.splitlines()
            if line.startswith(("id=", "id_like="))
            for word in line.split("=", 1)[1].split()
        }
        for family, names in (("debian", {"debian", "ubuntu"}), ("fedora", {"fedora", "rhel"})):
            if ids & names:
                return family
        return "other"

    def compose_up(self) -> None:
        """``docker compose up -d --wait rabbitmq`` in the project folder."""
        self.run(
            "compose", ["docker", "compose", "up", "-d", "--wait", "rabbitmq"], COMPOSE_SECONDS
        )

    def start_system(self) -> bool:
        """Start the ``rabbitmq-server`` service; True once the node has booted."""
        command = (
            ["service", "rabbitmq-server", "start"]
            if shutil.which("service")
            else ["/etc/init.d/rabbitmq-server", "start"]
        )
        if not quietly(command, START_SECONDS):
            return False
        return quietly(["rabbitmqctl", "await_startup", "--timeout", "60"], START_SECONDS)

    def start_private(self, port: int) -> str:
        """Start the project's own node on ``port`` (its data kept between runs); its URL."""
        node = self.own_node(port)
        try:
            node.start(timeout=START_SECONDS)
        except BrokerNodeError as error:
            raise NoBroker(f"{error}\n(the node's files: {node.base})") from error
        say(f"  its data and logs: {node.base}")
        return node.url

    def stop_private(self, port: int) -> int:
        """Stop the project's own node on ``port`` (never another); 0 once none runs there."""
        own = f"amqp://127.0.0.1:{port}/"
        if not (self.logs / str(port)).is_dir() or not listening(own):
            say(f"no node of the project's own runs on port {port}")
            return 0
        try:
            self.own_node(port).ctl("stop")
        except BrokerNodeError as error:
            first = str(error).strip().splitlines()[0]
            say(f"port {port} answers, but not as the project's own node ({first})")
            return 1
        with contextlib.suppress(NeverHappened):
            until(lambda: not listening(own), 30, interval=0.25)
        say(f"stopped the project's own RabbitMQ node on port {port}")
        return 0

    def own_node(self, port: int) -> PrivateBroker:
        """The project's own node on ``port``: its files in ``.rabbitmq/PORT/``."""
        return PrivateBroker(self.logs / str(port), Install(), port=port, lasting=True)

    def apt_install(self) -> None:
        """``apt-get update``, then ``apt-get install rabbitmq-server`` (log in .rabbitmq/)."""
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if not quietly(["apt-get", "update", "-qq"], INSTALL_SECONDS, env):
            say("  apt-get update failed: installing from the package lists already here")
        install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "rabbitmq-server"]
        self.run("apt", install, INSTALL_SECONDS, env)

    def run(
        self, name: str, command: list[str], timeout: float, env: dict[str, str] | None = None
    ) -> None:
        """Run ``command`` with its output in ``.rabbitmq/NAME.log``; NoBroker if it fails."""
        self.logs.mkdir(exist_ok=True)
        log = self.logs / f"{name}.log"
        with log.open("w") as out:
            try:
                code = subprocess.call(
                    command, cwd=self.project, stdout=out, stderr=out, env=env, timeout=timeout
                )
            except subprocess.TimeoutExpired:
                code = -1
        if code != 0:
            tail = log.read_text(errors="replace")[-2000:]
            raise NoBroker(f"{' '.join(command)} failed (log: {log}):\n{tail}")


def listening(url: str) -> bool:
    """Something accepts TCP connections at the URL's host and port."""
    try:
        parts = urlsplit(url)
        socket.create_connection((parts.hostname or "localhost", parts.port or 5672), 2).close()
    except (OSError, ValueError):
        return False
    return True


def quietly(command: list[str], timeout: float, env: dict[str, str] | None = None) -> bool:
    """Run ``command`` with no output; True when it exits 0 in time."""
    try:
        done = subprocess.run(command, capture_output=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
