"""CRON_AMQP_URL with several nodes: parsed whole, tried in turn, and a lost node left behind."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import aio_pika
import pytest
from aio_pika.abc import AbstractConnection

from warren_cron.broker.connect import connect
from warren_cron.broker.exclusive import plain_connection
from warren_cron.errors import BrokerUnavailable, SettingsError
from warren_cron.faultkit.private_broker import PrivateBroker, free_port
from warren_cron.runtime.settings import CronSettings, load_settings


def port_of(connection: AbstractConnection) -> int | None:
    """The port of the node ``connection`` is (or was last) connected to."""
    assert isinstance(connection, aio_pika.Connection)
    return connection.url.port


def dead_url() -> str:
    """A node URL where nothing listens."""
    return f"amqp://guest:secret@127.0.0.1:{free_port()}/"


def test_comma_separated_urls_are_the_nodes_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spaces are ignored, the order kept, and the safe URL hides every password."""
    monkeypatch.setenv("CRON_AMQP_URL", "amqp://u:pw1@a:5672/, amqp://u:pw2@b:5673/")
    settings = load_settings(CronSettings)
    assert settings.urls == ["amqp://u:pw1@a:5672/", "amqp://u:pw2@b:5673/"]
    assert settings.safe_url == "amqp://u:***@a:5672/,amqp://u:***@b:5673/"


def test_a_bad_node_url_is_named_by_its_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """The error names the variable and which URL of the list is wrong, not its password."""
    monkeypatch.setenv("CRON_AMQP_URL", "amqp://u:pw1@a/,http://u:pw2@b/")
    with pytest.raises(SettingsError, match="CRON_AMQP_URL") as error:
        load_settings(CronSettings)
    assert "URL 2" in str(error.value) and "pw" not in str(error.value)


async def test_the_first_node_that_answers_is_used(amqp_url: str) -> None:
    """A dead first node is skipped by robust and lock connections alike."""
    settings = CronSettings(amqp_url=f"{dead_url()},{amqp_url}")
    robust = await connect(settings, "test:node-list")
    plain = await plain_connection(settings, "test:node-list-lock", heartbeat=5)
    try:
        assert port_of(robust) == port_of(plain) == urlsplit(amqp_url).port
        for connection in (robust, plain):
            channel = await connection.channel()
            await channel.close()
    finally:
        await robust.close()
        await plain.close()


async def test_no_node_answering_names_every_node_without_passwords() -> None:
    """Every node down: BrokerUnavailable lists the nodes with their passwords hidden."""
    settings = CronSettings(amqp_url=f"{dead_url()},{dead_url()}")
    with pytest.raises(BrokerUnavailable) as error:
        await connect(settings, "test:no-node")
    assert "secret" not in str(error.value) and str(error.value).count("***") == 2


@pytest.mark.faults
async def test_a_robust_connection_moves_on_when_its_node_dies(
    private_broker: PrivateBroker, amqp_url: str
) -> None:
    """kill -9 of the node in use: the connection is back on the next node within seconds."""
    settings = CronSettings(amqp_url=f"{private_broker.url},{amqp_url}", heartbeat_seconds=2)
    connection = await connect(settings, "test:node-list-moves")
    back = asyncio.Event()
    connection.reconnect_callbacks.add(lambda _c: back.set())
    try:
        channel = await connection.channel()
        await asyncio.to_thread(private_broker.kill)
        await asyncio.wait_for(back.wait(), 20)
        assert port_of(connection) == urlsplit(amqp_url).port
        queue = await channel.declare_queue(exclusive=True)  # the channel was restored
        await queue.delete()
    finally:
        await connection.close()
