"""Who consumes a namespace's queues, by connection name and host, where the management API
tells: ``warren-worker-consume from 10.0.0.5``.

Its figures are refreshed every few seconds, so a process that has just connected may not be
named yet; the consumer counts AMQP gives, exact, decide whether a teardown is refused.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from warren_cron.broker.management import Management


async def consumer_peers(api: Management) -> dict[str, list[str]]:
    """For each queue of the virtual host with consumers: each consumer's connection, as
    ``<its connection_name> from <host>``, once."""
    consumers: list[dict[str, Any]] = await api.get(f"consumers/{api.vhost}") or []
    connections: list[dict[str, Any]] = await api.get(f"vhosts/{api.vhost}/connections") or []
    named = {
        c.get("name"): (c.get("client_properties") or {}).get("connection_name")
        for c in connections
    }
    peers: dict[str, list[str]] = defaultdict(list)
    for consumer in consumers:
        channel = consumer.get("channel_details") or {}
        label = named.get(channel.get("connection_name")) or "a client"
        peer = f"{label} from {channel.get('peer_host') or 'an unknown host'}"
        queue = str((consumer.get("queue") or {}).get("name", ""))
        if queue and peer not in peers[queue]:
            peers[queue].append(peer)
    return peers
