"""How the demo and the tests get a broker when none answers: each branch, on a fake machine."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest

from warren_cron.cli.broker_up import (
    PRIVATE_PORT,
    Broker,
    NoBroker,
    bring_up,
    ours_to_bring_up,
)

DEFAULT = "amqp://guest:guest@localhost:5672/"


@dataclass
class FakeHost:
    """A machine of given facts that records what was done to it."""

    listening: set[int] = field(default_factory=set)
    engine: bool = False
    installed: bool = False
    root: bool = False
    family: str = "debian"
    system_starts: bool = True
    done: list[str] = field(default_factory=list)

    def answers(self, url: str) -> bool:
        """True when the URL's port is among those listening."""
        return any((urlsplit(one).port or 5672) in self.listening for one in url.split(","))

    def docker_engine(self) -> bool:
        """The given fact."""
        return self.engine

    def server_installed(self) -> bool:
        """The given fact."""
        return self.installed

    def is_root(self) -> bool:
        """The given fact."""
        return self.root

    def platform(self) -> str:
        """The given fact."""
        return self.family

    def compose_up(self) -> None:
        """Compose's broker listens on 5672."""
        self.done.append("compose up")
        self.listening.add(5672)

    def start_system(self) -> bool:
        """The system service starts on 5672, or fails as told."""
        self.done.append("start system")
        return self.system_starts

    def start_private(self, port: int) -> str:
        """A node of the project's own on ``port``."""
        self.done.append(f"start private {port}")
        return f"amqp://guest:guest@127.0.0.1:{port}/"

    def apt_install(self) -> None:
        """The package is installed."""
        self.done.append("apt install")
        self.installed = True


def test_a_broker_that_answers_is_used_and_nothing_is_started() -> None:
    """A running broker is left as it is, wherever it is."""
    host = FakeHost(listening={5672}, engine=True, installed=True, root=True)
    assert bring_up(DEFAULT, host) == Broker(DEFAULT)
    assert host.done == []


def test_a_docker_engine_brings_up_composes_rabbitmq_first() -> None:
    """With an engine, Compose's service comes before any installed server."""
    host = FakeHost(engine=True, installed=True, root=True)
    assert bring_up(DEFAULT, host) == Broker(DEFAULT, "docker compose stop rabbitmq")
    assert host.done == ["compose up"]


def test_without_an_engine_root_starts_the_installed_system_service() -> None:
    """Root with rabbitmq-server installed starts the system's service on 5672."""
    host = FakeHost(installed=True, root=True)
    assert bring_up(DEFAULT, host) == Broker(DEFAULT, "service rabbitmq-server stop")
    assert host.done == ["start system"]


def test_a_user_who_is_not_root_gets_a_node_of_the_projects_own() -> None:
    """Without root the system service is left alone: a private node on its own port."""
    host = FakeHost(installed=True, root=False)
    broker = bring_up(DEFAULT, host)
    assert broker.url == f"amqp://guest:guest@127.0.0.1:{PRIVATE_PORT}/"
    assert broker.stop.endswith(f"--stop {PRIVATE_PORT}")
    assert host.done == [f"start private {PRIVATE_PORT}"]


def test_a_system_service_that_does_not_start_falls_back_to_a_private_node() -> None:
    """Root whose service fails to start still gets a broker, on the project's port."""
    host = FakeHost(installed=True, root=True, system_starts=False)
    broker = bring_up(DEFAULT, host)
    assert host.done == ["start system", f"start private {PRIVATE_PORT}"]
    assert f":{PRIVATE_PORT}/" in broker.url


def test_a_private_node_left_running_is_used_again() -> None:
    """The node a former run left on the project's port is found before starting anything."""
    host = FakeHost(listening={PRIVATE_PORT}, engine=True, installed=True, root=True)
    broker = bring_up(DEFAULT, host)
    assert broker.url == f"amqp://guest:guest@127.0.0.1:{PRIVATE_PORT}/"
    assert host.done == []


def test_a_url_on_another_local_port_gets_a_private_node_on_that_port() -> None:
    """Neither Docker nor the system service serve another port: the node takes the URL's."""
    url = "amqp://guest:guest@127.0.0.1:5999/"
    host = FakeHost(engine=True, installed=True, root=True)
    assert bring_up(url, host).url == url
    assert host.done == ["start private 5999"]


def test_root_on_debian_installs_rabbitmq_server_then_starts_it() -> None:
    """A bare Debian machine run as root gets the package, then its service."""
    host = FakeHost(root=True, family="debian")
    assert bring_up(DEFAULT, host).stop == "service rabbitmq-server stop"
    assert host.done == ["apt install", "start system"]


def test_a_user_on_debian_is_told_the_apt_command_and_nothing_is_installed() -> None:
    """Without root nothing is installed: the message names the command to run."""
    host = FakeHost(root=False, family="debian")
    with pytest.raises(NoBroker, match="not root") as raised:
        bring_up(DEFAULT, host)
    assert "sudo apt-get install -y rabbitmq-server" in str(raised.value)
    assert "docker compose up -d --wait rabbitmq" in str(raised.value)
    assert host.done == []


@pytest.mark.parametrize(
    ("family", "command"),
    [
        ("fedora", "sudo dnf install -y rabbitmq-server"),
        ("macos", "brew install rabbitmq && brew services start rabbitmq"),
    ],
)
def test_other_platforms_are_told_their_own_install_command(family: str, command: str) -> None:
    """Even as root, apt-get is used only on Debian and Ubuntu; others get their command."""
    host = FakeHost(root=True, family=family)
    with pytest.raises(NoBroker, match="Install and start RabbitMQ") as raised:
        bring_up(DEFAULT, host)
    assert command in str(raised.value)
    assert host.done == []


def test_an_unknown_platform_is_told_every_command() -> None:
    """Where the platform is not known, every platform's command is listed."""
    with pytest.raises(NoBroker) as raised:
        bring_up(DEFAULT, FakeHost(family="other"))
    assert "apt-get" in str(raised.value) and "dnf" in str(raised.value)
    assert "brew" in str(raised.value)


@pytest.mark.parametrize(
    "url",
    [
        "amqp://app:s3cret-pw@localhost:5672/",
        "amqp://guest:guest@rabbit.example.com:5672/",
        "amqp://guest:guest@localhost:5672/production",
        "amqps://guest:guest@localhost:5671/",
        "amqp://guest:guest@localhost:5672/,amqp://guest:guest@localhost:5673/",
    ],
)
def test_a_broker_that_is_not_this_machines_default_is_never_brought_up(url: str) -> None:
    """Another host, login, vhost, scheme or a cluster list: only a clear error, no secret."""
    host = FakeHost(engine=True, installed=True, root=True)
    assert ours_to_bring_up(url) is None
    with pytest.raises(NoBroker, match="nothing was started") as raised:
        bring_up(url, host)
    assert "s3cret-pw" not in str(raised.value)
    assert host.done == []


@pytest.mark.parametrize(
    ("url", "port"),
    [
        ("amqp://guest:guest@localhost:5672/", 5672),
        ("amqp://localhost", 5672),
        ("amqp://guest:guest@127.0.0.1:5999/%2F", 5999),
        ("amqp://guest:guest@[::1]:5680/", 5680),
    ],
)
def test_a_guest_login_on_this_host_is_ours_to_bring_up(url: str, port: int) -> None:
    """Any loopback address and port with the default login and vhost counts as ours."""
    assert ours_to_bring_up(url) == port


def test_each_step_says_what_it_does_and_how_long_it_took(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Installing and starting are announced before, and timed after, on stderr only."""
    broker = bring_up(DEFAULT, FakeHost(root=True, family="debian"))
    out, err = capsys.readouterr()
    assert out == "" and broker.url == DEFAULT
    lines = err.splitlines()
    assert lines[0].startswith("installing rabbitmq-server with apt-get")
    assert lines[2].startswith("starting the system's rabbitmq-server service")
    assert lines[1].startswith("  done in ") and lines[3].startswith("  done in ")
