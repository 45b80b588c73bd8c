"""Make sure a RabbitMQ answers at ``CRON_AMQP_URL``, bringing one up when it is this machine's.

``scripts/demo.sh`` and ``scripts/test.sh`` run ``python -m warren_cron.cli.broker_up``. When
nothing answers and the URL is a guest login on this host (any port), it tries in order:

1. Docker Compose's ``rabbitmq`` service, where a Docker engine answers (URL on port 5672);
2. the installed ``rabbitmq-server``: the system service as root (URL on port 5672), else a
   node of the project's own in ``.rabbitmq/PORT/`` (the URL's port, or 5682 for 5672);
3. as root on Debian or Ubuntu, ``apt-get install rabbitmq-server``, then step 2;
4. else it names the command that installs one on this platform, and exits 1.

It prints the broker's URL on the first line of its output and, when it started one, how to
stop it on the second; what it does, and how long each step took, goes to stderr.
``--stop PORT`` stops the project's own node on PORT. The machine's own broker is never
stopped or reconfigured.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

from warren_cron.runtime.settings import redact_url

#: Where the system service, Docker Compose and the default URL listen.
SYSTEM_PORT = 5672
#: The project's own node when the URL names the system's port but the system cannot serve it.
PRIVATE_PORT = 5682
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
COMPOSE_UP = "docker compose up -d --wait rabbitmq"
INSTALL_COMMANDS = {
    "debian": "sudo apt-get install -y rabbitmq-server   (the package starts the service)",
    "fedora": "sudo dnf install -y rabbitmq-server && sudo systemctl enable --now rabbitmq-server",
    "macos": "brew install rabbitmq && brew services start rabbitmq",
}


class Host(Protocol):
    """What the choice needs to know of, and do on, this machine."""

    def answers(self, url: str) -> bool:
        """Something accepts connections at ``url`` (any node of a comma-separated list)."""
        ...

    def docker_engine(self) -> bool:
        """A Docker engine answers and ``docker compose`` is there."""
        ...

    def server_installed(self) -> bool:
        """``rabbitmq-server`` is installed."""
        ...

    def is_root(self) -> bool:
        """This process may install packages and start system services."""
        ...

    def platform(self) -> str:
        """``debian`` (Debian, Ubuntu), ``fedora``, ``macos`` or ``other``."""
        ...

    def compose_up(self) -> None:
        """Start Compose's ``rabbitmq`` service and wait for its health check."""
        ...

    def start_system(self) -> bool:
        """Start the system's ``rabbitmq-server`` service; True once it accepts logins."""
        ...

    def start_private(self, port: int) -> str:
        """Start (or find running) the project's own node on ``port``; its URL."""
        ...

    def apt_install(self) -> None:
        """``apt-get install rabbitmq-server``."""
        ...


class NoBroker(RuntimeError):
    """No broker answers and none could be brought up; the message says what to run."""


@dataclass(frozen=True)
class Broker:
    """The URL to use, and how to stop the broker when this run started it."""

    url: str
    stop: str = ""


def ours_to_bring_up(url: str) -> int | None:
    """The port of ``url`` when it is a guest login on this host's default vhost, else None."""
    parts = urlsplit(url)
    if "," in url or parts.scheme != "amqp" or parts.hostname not in LOOPBACK:
        return None
    if parts.username not in (None, "guest") or parts.password not in (None, "guest"):
        return None
    if parts.path not in ("", "/", "/%2F", "/%2f"):
        return None
    return parts.port or SYSTEM_PORT


def on_port(url: str, port: int) -> str:
    """``url`` moved to ``port`` on 127.0.0.1."""
    parts = urlsplit(url)
    login = parts.netloc.rpartition("@")[0]
    netloc = f"{login}@127.0.0.1:{port}" if login else f"127.0.0.1:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


@contextmanager
def step(what: str) -> Iterator[None]:
    """Say what is being done, then how long it took (or that it failed, and after how long)."""
    say(f"{what} ...")
    started = time.monotonic()
    try:
        yield
    except BaseException:
        say(f"  failed after {time.monotonic() - started:.1f} s")
        raise
    say(f"  done in {time.monotonic() - started:.1f} s")


def say(line: str) -> None:
    """One line of progress, on stderr (stdout carries the URL)."""
    print(line, file=sys.stderr, flush=True)


def bring_up(url: str, host: Host) -> Broker:
    """A broker answering at ``url``, or at the project's own node in its stead."""
    if host.answers(url):
        return Broker(url)
    port = ours_to_bring_up(url)
    if port is None:
        raise NoBroker(not_ours(url))
    if port == SYSTEM_PORT and host.answers(on_port(url, PRIVATE_PORT)):
        say(f"using the project's own RabbitMQ node, already running on port {PRIVATE_PORT}")
        return Broker(on_port(url, PRIVATE_PORT), stop_private(PRIVATE_PORT))
    if port == SYSTEM_PORT and host.docker_engine():
        with step(f"starting RabbitMQ with Docker Compose ({COMPOSE_UP})"):
            host.compose_up()
        return Broker(url, "docker compose stop rabbitmq")
    return from_server(url, port, host)


def from_server(url: str, port: int, host: Host) -> Broker:
    """Start the installed ``rabbitmq-server`` (installing it first where we may)."""
    if not host.server_installed():
        install(host)
    if port == SYSTEM_PORT and host.is_root():
        with step("starting the system's rabbitmq-server service"):
            started = host.start_system()
        if started:
            return Broker(url, "service rabbitmq-server stop")
        say("the system's service did not start: running a node of the project's own instead")
    own = PRIVATE_PORT if port == SYSTEM_PORT else port
    with step(f"starting a RabbitMQ node of the project's own on port {own} (in .rabbitmq/)"):
        node_url = host.start_private(own)
    return Broker(url if own == port else node_url, stop_private(own))


def install(host: Host) -> None:
    """``apt-get install rabbitmq-server`` as root on Debian or Ubuntu; else what to run."""
    platform = host.platform()
    if platform == "debian" and host.is_root():
        with step("installing rabbitmq-server with apt-get (Debian's package, about 30 MB)"):
            host.apt_install()
        return
    why = "not root, so nothing was installed" if platform == "debian" else "nothing installed"
    raise NoBroker(f"no RabbitMQ answers and none is installed ({why}).\n" + how_to(platform))


def how_to(platform: str) -> str:
    """The commands that give this platform a broker, then run the script again."""
    commands = (
        [INSTALL_COMMANDS[platform]]
        if platform in INSTALL_COMMANDS
        else [f"{name}: {command}" for name, command in INSTALL_COMMANDS.items()]
    )
    lines = [f"  {command}" for command in commands]
    return "\n".join(
        [
            "Install and start RabbitMQ with:",
            *lines,
            f"or, with Docker:  {COMPOSE_UP}",
            "then run the script again.",
        ]
    )


def not_ours(url: str) -> str:
    """Why nothing was started for a URL that is not this machine's default broker."""
    return (
        f"no RabbitMQ answers at {redact_url(url)}. It is not a guest login on this host,"
        " so nothing was started: start that broker, or unset CRON_AMQP_URL to use"
        " (and bring up) one on this machine."
    )


def stop_private(port: int) -> str:
    """The command that stops the project's own node on ``port``."""
    return f".venv/bin/python -m warren_cron.cli.broker_up --stop {port}"


def main(argv: list[str] | None = None) -> int:
    """Bring up (or ``--stop``) a broker; print its URL and how to stop it."""
    parser = argparse.ArgumentParser(prog="broker_up", description=__doc__.split("\n")[0])
    parser.add_argument("url", help="the broker URL (CRON_AMQP_URL)", nargs="?")
    parser.add_argument("--project", type=Path, default=Path.cwd(), help="project folder")
    parser.add_argument("--stop", type=int, metavar="PORT", help="stop the node on PORT")
    args = parser.parse_args(argv)
    from warren_cron.cli.broker_host import MachineHost

    host = MachineHost(args.project)
    if args.stop is not None:
        return host.stop_private(args.stop)
    try:
        broker = bring_up(args.url or f"amqp://guest:guest@localhost:{SYSTEM_PORT}/", host)
    except NoBroker as error:
        say(str(error))
        return 1
    print(broker.url)
    print(broker.stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
