"""The private node itself: fault tests rely on it stopping and starting on demand."""

from __future__ import annotations

from pathlib import Path

import aio_pika
import pytest

from warren_cron.faultkit.install import Install
from warren_cron.faultkit.login import logs_in
from warren_cron.faultkit.private_broker import PrivateBroker, node_port

pytestmark = pytest.mark.faults


async def test_durable_messages_survive_a_kill_of_the_private_node(
    private_broker: PrivateBroker,
) -> None:
    """A persistent message in a durable queue is still there after kill -9 and start."""
    connection = await aio_pika.connect(private_broker.url)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue("t_private_survives", durable=True)
        await channel.default_exchange.publish(
            aio_pika.Message(b"kept", delivery_mode=aio_pika.DeliveryMode.PERSISTENT), queue.name
        )
    private_broker.sync_metadata()  # the queue is new: make its declaration crash-proof
    private_broker.kill()
    private_broker.start()
    connection = await aio_pika.connect(private_broker.url)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue("t_private_survives", durable=True)
        message = await queue.get(timeout=5)
        assert message is not None and message.body == b"kept"
        await message.ack()
        await queue.delete()


def test_a_node_whose_default_vhost_stays_down_is_made_anew_for_the_next_test(
    private_broker: PrivateBroker,
) -> None:
    """Its vhost gone for good (as RabbitMQ 4.3.6 leaves one whose recovery failed), every
    login refused: serving() makes the node anew, and a login gets in again."""
    private_broker.ctl("delete_vhost", "/")
    assert not logs_in(private_broker.url)
    private_broker.serving(timeout=3)
    assert logs_in(private_broker.url)


def test_private_nodes_listen_outside_the_ephemeral_ports(tmp_path: Path) -> None:
    """A stopped node's ports cannot be taken by an outgoing connection meanwhile: they lie
    below the kernel's ephemeral range, so a killed node always starts again on them."""
    low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    node = PrivateBroker(tmp_path / "node", Install())
    chosen = [node.port, node.dist_port, *(node_port() for _ in range(200))]
    assert not [port for port in chosen if low <= port <= high]
