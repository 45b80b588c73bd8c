"""A private RabbitMQ cluster: three (or N) private nodes of one release, one cookie, joined.

Each node has its own name, ports and data directory (``PrivateBroker``); they share an Erlang
cookie through one ``HOME``. ``url`` lists every node, comma-separated, as ``CRON_AMQP_URL``
takes it, so the project's processes connect to the first node answering and move on when
theirs dies. The cluster answers ``ctl`` and ``sync_metadata`` like a single node does, so a
scenario runs on either.
"""

from __future__ import annotations

import random
import secrets
import shutil
from pathlib import Path
from typing import Any

import orjson

from warren_cron.faultkit.install import BrokerNodeError, Install, release
from warren_cron.faultkit.private_broker import PrivateBroker


class PrivateCluster:
    """``size`` private nodes joined into one cluster; removed together."""

    def __init__(self, base: Path, size: int = 3, install: Install | None = None) -> None:
        self.install = install or Install.of(release())
        self.cookie_dir, cookie_inner = self.install.place(base / "cookie")
        self.cookie_dir.mkdir(parents=True, exist_ok=True)
        cookie = self.cookie_dir / ".erlang.cookie"
        cookie.write_text(secrets.token_hex(16))
        cookie.chmod(0o400)  # Erlang refuses a cookie others can read
        self.nodes = [
            PrivateBroker(base / f"n{i}", self.install, cookie=cookie_inner)
            for i in range(1, size + 1)
        ]
        for node in self.nodes:
            with (node.base / "rabbitmq.conf").open("a") as conf:
                # The setting docs/cluster.md asks of a three-node cluster: a node that finds
                # itself cut off from the majority pauses instead of going on alone.
                conf.write("cluster_partition_handling = pause_minority\n")
        self.url = ",".join(node.url for node in self.nodes)

    def start(self) -> None:
        """Start the first node, then start and join each other one to it."""
        first, *others = self.nodes
        first.start()
        for node in others:
            node.start()
            node.ctl("stop_app")
            node.ctl("join_cluster", first.node)
            node.ctl("start_app")
            node.ctl("await_startup", "--timeout", "60", timeout=90)

    def running(self) -> list[PrivateBroker]:
        """Nodes whose VM runs now."""
        return [node for node in self.nodes if node.is_running()]

    def ctl(self, *args: str, timeout: float = 60) -> str:
        """``rabbitmqctl`` on the first node that answers it."""
        error: BrokerNodeError | None = None
        for node in self.running():
            try:
                return node.ctl(*args, timeout=timeout)
            except BrokerNodeError as failed:
                error = failed
        raise error or BrokerNodeError("no node of the cluster runs")

    def depths(self) -> dict[str, int]:
        """Messages (ready and unacked) of every queue, by name, as ``rabbitmqctl`` lists them.

        Not through one node's ``erl_call``: a quorum queue's length is known on its leader's
        node, and another node answers 0 for it."""
        out = self.ctl("list_queues", "name", "messages", "--formatter", "json")
        rows: list[dict[str, Any]] = orjson.loads(out)
        return {row["name"]: row["messages"] for row in rows if isinstance(row["messages"], int)}

    def sync_metadata(self) -> None:
        """Flush the metadata log of every running node."""
        for node in self.running():
            node.sync_metadata()

    def set_consumer_timeout(self, ms: int) -> None:
        """Every node's ``consumer_timeout`` for channels opened from now on, restarts too."""
        for node in self.nodes:
            node.set_consumer_timeout(ms)

    def victim(self, rng: random.Random) -> PrivateBroker:
        """A node chosen at random: broker faults break one node at a time."""
        return rng.choice(self.nodes)

    def members(self) -> set[str]:
        """Nodes the cluster reports running, as seen by any running node."""
        return set(self._status()["running_nodes"])

    def partitioned(self) -> set[str]:
        """Nodes that some node reports on the other side of a network partition."""
        partitions = self._status().get("partitions") or {}
        return {node for seen in partitions.values() for node in seen} | set(partitions)

    def whole(self) -> bool:
        """Every node runs, in one cluster, with no partition reported."""
        return len(self.members()) == len(self.nodes) and not self.partitioned()

    def heal(self) -> None:
        """What docs/cluster.md asks of an operator: restart a node left outside the cluster.

        ``pause_minority`` pauses a node that sees itself cut off, and it rejoins by itself
        when it sees the others again; a node that was frozen (a VM suspended) sees its peers
        gone and back at once on waking, never pauses, and stays partitioned until restarted.
        """
        self.restart_all()
        outside = self.cut_off() | {n.node for n in self.nodes} - self.members()
        for node in self.nodes:
            if node.node in outside:
                node.restart()

    def cut_off(self) -> set[str]:
        """Nodes that report a partition from enough peers to be in a minority: only they are
        restarted by ``heal`` (the majority's nodes, and their clients, stay up). Every node
        reporting a partition when no side is a minority (an even split)."""
        partitions: dict[str, list[str]] = self._status().get("partitions") or {}
        minority = {
            node
            for node, lost in partitions.items()
            if 2 * (len(self.nodes) - len(lost)) <= len(self.nodes)
        }
        return minority or self.partitioned()

    def isolate(self, node: PrivateBroker) -> None:
        """Cut ``node`` off from its peers, a network partition: it keeps running and serving
        its own clients, but its Erlang distribution now refuses the others (a wrong cookie
        for each of them), and they it. ``rejoin`` ends it."""
        node.ctl("eval", f"[{_erl_cut('warren_cut')} || N <- [{self._peers(node)}]], ok.")

    def rejoin(self, node: PrivateBroker) -> None:
        """End ``isolate``: ``node`` accepts its peers again and they reconnect."""
        cookie = "erlang:get_cookie()"
        node.ctl("eval", f"[{_erl_cut(cookie)} || N <- [{self._peers(node)}]], ok.")
        node.ctl("eval", f"[net_adm:ping(N) || N <- [{self._peers(node)}]], ok.")

    def _peers(self, node: PrivateBroker) -> str:
        return ",".join(f"'{other.node}'" for other in self.nodes if other is not node)

    def _status(self) -> dict[str, Any]:
        status: dict[str, Any] = orjson.loads(self.ctl("cluster_status", "--formatter", "json"))
        return status

    def by_name(self, name: str) -> PrivateBroker:
        """The node called ``name`` (``rabbit@host`` form)."""
        return next(node for node in self.nodes if node.node == name.strip("'\" "))

    def queue_leader(self, queue: str) -> PrivateBroker:
        """The node leading quorum queue ``queue`` now."""
        out = self.ctl("list_queues", "name", "leader", "--no-table-headers", "--quiet")
        for line in out.splitlines():
            name, _, leader = line.partition("\t")
            if name == queue:
                return self.by_name(leader)
        raise BrokerNodeError(f"no queue {queue!r} in the cluster")

    def restart_all(self) -> None:
        """Start every node that is not running (each rejoins the cluster)."""
        for node in self.nodes:
            node.start()

    def remove(self) -> None:
        """Stop every node and delete every file of the cluster."""
        for node in self.nodes:
            node.remove()
        shutil.rmtree(self.cookie_dir, ignore_errors=True)


def _erl_cut(cookie: str) -> str:
    """Erlang: use ``cookie`` with peer ``N`` from now on, and drop the link to it."""
    return f"begin erlang:set_cookie(N, {cookie}), erlang:disconnect_node(N) end"
