"""Tearing a namespace down: every queue, stream and exchange warren declared in it, found,
checked for connected warren processes, then deleted.

How they are found. With a management API, its list of the virtual host's queues and
exchanges, each name matched by its exact shape (``namespace_shapes``): everything, per-key
queues included. Without one (AMQP cannot list), the names warren can compute are looked up
by passive declares: the fixed ones, the 28 delay levels, and the retry and landing queues of
every plan known (the CRON_* default, the schedules file, the runtime store, the failed
records, and those given); the queues made per key (idempotency keys, crash marks, run locks,
concurrency slots, rate windows) cannot be found that way, and ``Teardown.unseen`` says so.

A warren process is connected when a queue of the namespace has consumers (the workers on
the main queue, the monitor on its queue, the scheduler on its leader lock, readers of the
streams) or an exclusive queue is held (a running task's lock or slot). The deletion is then
refused (``NamespaceInUse``) unless forced; forced, a running worker declares its queues
again, as it does whenever its queue is deleted under it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from aio_pika.abc import AbstractConnection
from aiormq.exceptions import AMQPError, ChannelLockedResource, ChannelNotFoundEntity

from warren_cron.broker.connect import close_quietly, connect, open_channel
from warren_cron.broker.exclusive import exists
from warren_cron.broker.management import Management, vhost_and_auth
from warren_cron.delay import delay_objects
from warren_cron.errors import WarrenError
from warren_cron.names import Names
from warren_cron.ops.namespace_peers import consumer_peers
from warren_cron.ops.namespace_plans import known_plan_keys
from warren_cron.ops.namespace_shapes import owned
from warren_cron.runtime.settings import CronSettings

Kind = Literal["queue", "stream", "exchange"]
#: What the listing without a management API cannot see.
#: The most partitions a namespace may have (``CRON_SCHEDULER_PARTITIONS``' bound).
MAX_PARTITIONS = 256
UNSEEN = (
    "queues made per key (idempotency keys, crash marks, run locks, concurrency slots, rate "
    "windows) are found only through the management API: give --management-url"
)


@dataclass(frozen=True, slots=True)
class Found:
    """One object of the namespace as the broker showed it."""

    name: str
    kind: Kind
    messages: int = 0
    consumers: int = 0
    #: An exclusive queue another connection holds (a running task's lock or slot).
    held: bool = False


@dataclass(slots=True)
class Teardown:
    """What a teardown found, who is connected, and what it deleted."""

    namespace: str
    #: ``management`` when the management API listed the virtual host, else ``amqp``.
    listed_by: str
    objects: list[Found]
    #: One line per queue with warren processes on it: how many, which queue, who.
    connected: list[str]
    deleted: list[str] = field(default_factory=list)
    #: Objects that could not be deleted, each with why.
    failed: dict[str, str] = field(default_factory=dict)
    #: What the listing cannot see; empty when it sees everything.
    unseen: str = ""

    def count(self, kind: Kind) -> int:
        """How many objects of ``kind`` were found."""
        return sum(1 for found in self.objects if found.kind == kind)

    def to_json(self) -> dict[str, Any]:
        """The result for machines (``--json``, and the HTTP API later)."""
        return {**asdict(self), "objects": [asdict(found) for found in self.objects]}


class NamespaceInUse(WarrenError):
    """Warren processes are connected to the namespace: stop them first, or force."""

    def __init__(self, found: Teardown) -> None:
        super().__init__(f"connected to namespace {found.namespace}: {'; '.join(found.connected)}")
        self.found = found


def roles(names: Names) -> dict[str, str]:
    """Who consumes each queue that tells of a process."""
    return {
        names.main_queue: "a worker",
        names.monitor_queue: "a monitor",
        names.leader_queue: "a scheduler (its leader lock)",
        names.beat_stream: "a scheduler or monitor reading the beats",
    }


def who(names: Names, found: Found, peers: Iterable[str] = ()) -> str:
    """One line naming the processes on ``found`` (``peers``: their connections, if known)."""
    if found.held:
        return f"{found.name} is held by a running task of a connected worker"
    role = roles(names).get(found.name, "a warren process")
    if found.name.startswith(f"{names.leader_queue}."):
        role = "a scheduler (a partition's lock)"
    plural = "s" if found.consumers > 1 else ""
    known = f": {', '.join(peers)}" if peers else ""
    return f"{found.consumers} consumer{plural} on {found.name} ({role}{known})"


async def survey(
    settings: CronSettings, management_url: str | None = None, plans: Iterable[str] = ()
) -> Teardown:
    """Find every object of ``settings.namespace`` and who is connected; changes nothing."""
    names = Names(settings.namespace)
    api = management(settings, management_url) if management_url else None
    async with await connect(settings, "warren-namespace", log_outages=False) as connection:
        found = await objects(connection, settings, api, plans)
    peers = await consumer_peers(api) if api and any(f.consumers for f in found) else {}
    busy = [who(names, f, peers.get(f.name, ())) for f in found if f.consumers or f.held]
    listed_by, unseen = ("management", "") if api else ("amqp", UNSEEN)
    return Teardown(names.namespace, listed_by, found, busy, unseen=unseen)


async def delete(
    settings: CronSettings,
    *,
    force: bool = False,
    management_url: str | None = None,
    plans: Iterable[str] = (),
) -> Teardown:
    """Delete every object of ``settings.namespace``; ``NamespaceInUse`` while warren
    processes are connected, unless ``force``."""
    found = await survey(settings, management_url, plans)
    if found.connected and not force:
        raise NamespaceInUse(found)
    async with await connect(settings, "warren-namespace", log_outages=False) as connection:
        for item in found.objects:
            problem = await remove(connection, item)
            if problem is None:
                found.deleted.append(item.name)
            else:
                found.failed[item.name] = problem
    return found


def management(settings: CronSettings, url: str) -> Management:
    """The management API at ``url``, for the AMQP URL's virtual host and, by default, user."""
    vhost, auth = vhost_and_auth(settings.urls[0])
    return Management(url, vhost, auth)


async def objects(
    connection: AbstractConnection,
    settings: CronSettings,
    api: Management | None,
    plans: Iterable[str],
) -> list[Found]:
    """The namespace's objects that exist: listed by ``api``, else computed."""
    if api is not None:
        every = await api.names("queues"), await api.names("exchanges")
        queues, exchanges = owned(settings.namespace, *every)
    else:
        queues, exchanges = await computed(connection, settings, plans)
    found = await probed(connection, Names(settings.namespace), queues)
    found += [await probe_exchange(connection, name) for name in exchanges]
    return [item for item in found if item is not None]


async def computed(
    connection: AbstractConnection, settings: CronSettings, plans: Iterable[str]
) -> tuple[list[str], list[str]]:
    """The names warren can compute for the namespace: fixed, delay levels, known plans."""
    names = Names(settings.namespace)
    keys = sorted(await known_plan_keys(connection, settings, plans))
    delay_queues, delay_exchanges = delay_objects(names, keys)
    count = await partition_count(connection, names, settings.scheduler_partitions)
    queues = [*names.queues(keys), *names.partition_queues(count)]
    return [*queues, *delay_queues], [*names.exchanges, *delay_exchanges]


async def partition_count(connection: AbstractConnection, names: Names, configured: int) -> int:
    """The namespace's partitions: ``configured``, or as many as its schedulers' locks say
    (numbered from 0) when the command runs without their ``CRON_SCHEDULER_PARTITIONS``: a
    teardown left their 128 queues behind."""
    count = 0
    while count < MAX_PARTITIONS and await exists(
        connection, names.partition_leader_queue(count, MAX_PARTITIONS)
    ):
        count += 1
    return max(configured, count)


def streams(names: Names) -> set[str]:
    """The namespace's streams (queues of type stream)."""
    logs = {names.history_stream, names.control_stream, names.cancels_stream}
    return {*logs, names.store_log, names.beat_stream}


async def probed(
    connection: AbstractConnection, names: Names, queues: Iterable[str]
) -> list[Found | None]:
    """Each of ``queues`` as the broker shows it (None for those that do not exist)."""
    return [await probe_queue(connection, names, name) for name in queues]


async def probe_queue(connection: AbstractConnection, names: Names, name: str) -> Found | None:
    """Queue ``name``'s messages and consumers by a passive declare; None if it is absent."""
    kind: Kind = "stream" if name in streams(names) else "queue"
    channel = await open_channel(connection)
    try:
        queue = await channel.declare_queue(name, passive=True)
    except ChannelNotFoundEntity:
        return None
    except ChannelLockedResource:
        return Found(name, kind, held=True)
    finally:
        await close_quietly(channel)
    result = queue.declaration_result
    return Found(name, kind, result.message_count or 0, result.consumer_count or 0)


async def probe_exchange(connection: AbstractConnection, name: str) -> Found | None:
    """Exchange ``name``, or None when it does not exist."""
    channel = await open_channel(connection)
    try:
        await channel.declare_exchange(name, passive=True)
    except ChannelNotFoundEntity:
        return None
    finally:
        await close_quietly(channel)
    return Found(name, "exchange")


async def remove(connection: AbstractConnection, found: Found) -> str | None:
    """Delete ``found``; None when done (or already gone), else why it was not."""
    channel = await open_channel(connection)
    try:
        if found.kind == "exchange":
            await channel.exchange_delete(found.name)
        else:
            await channel.queue_delete(found.name)
    except ChannelNotFoundEntity:
        return None
    except ChannelLockedResource:
        return "held by a connected process: it goes when that process disconnects"
    except AMQPError as error:
        return f"the broker refused: {type(error).__name__}: {error}"
    finally:
        await close_quietly(channel)
    return None
