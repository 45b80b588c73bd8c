"""The async client: enqueue tasks from an application, now, at a time or after a delay."""

from __future__ import annotations

import asyncio
from contextlib import suppress
from typing import Any, Unpack

from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractRobustConnection,
)

from warren_cron.broker.connect import connect, owned_publish_channel
from warren_cron.cancel.stream import declare_cancels
from warren_cron.client.keys import KeyClaims
from warren_cron.client.options import Enqueued, EnqueueOptions, one_off, plan_of
from warren_cron.client.runs import RunHandle
from warren_cron.client.schedules import ScheduleMethods
from warren_cron.clock import utcnow
from warren_cron.declare import declare_topology
from warren_cron.envelope import Envelope
from warren_cron.errors import broker_failures
from warren_cron.history.stream import declare_history
from warren_cron.names import Names
from warren_cron.plan import RetryPlan
from warren_cron.publish import TaskPublisher
from warren_cron.runtime.settings import CronSettings, load_settings


class Client(ScheduleMethods):
    """Enqueues tasks: one connection, confirmed mandatory publishes, plans declared once.

    ``async with Client() as client: await client.enqueue("http", {...}, delay=90)``. Settings
    come from the CRON_* environment unless given.
    """

    def __init__(self, settings: CronSettings | None = None, *, name: str = "warren-client"):
        self.settings = settings or load_settings(CronSettings)
        self._names = Names(self.settings.namespace)
        self._name = name
        self._default = self.settings.default_plan()
        self._lock = asyncio.Lock()
        self._connection: AbstractRobustConnection | None = None
        self._channel: AbstractChannel | None = None
        self._publisher: TaskPublisher | None = None
        self._keys: KeyClaims | None = None
        self._history_declared = False
        self._cancels_declared = False

    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Connect and declare the topology, once; ``BrokerUnavailable`` when unreachable. A
        channel the broker closed (a declaration it refused, an outage) is replaced here."""
        async with self._lock:
            if self._publisher is None:
                await self._open()
            elif self._channel is None or self._channel.is_closed:
                assert self._connection is not None
                await self._ready(await owned_publish_channel(self._connection))

    async def _open(self) -> None:
        connection = await connect(self.settings, self._name)
        try:
            await self._ready(await owned_publish_channel(connection))
        except BaseException:
            await connection.close()
            raise
        self._connection = connection

    async def _ready(self, channel: AbstractChannel) -> None:
        self._channel = channel
        topology = await declare_topology(channel, self._names, self.settings)
        queue_type = self.settings.queue_type
        self._publisher = TaskPublisher(channel, topology.tasks, self._names, queue_type)
        self._keys = KeyClaims(channel, self._names)

    async def close(self) -> None:
        """Close the connection; a later enqueue connects again."""
        async with self._lock:
            connection, self._connection = self._connection, None
            self._publisher = self._keys = self._channel = None
            if connection is not None:
                await connection.close()

    def run(self, run: str | Enqueued) -> RunHandle:
        """A handle on one run, by its id or by what ``enqueue`` returned: its status, and its
        result once it ends."""
        if isinstance(run, Enqueued):
            return RunHandle(self, run.run_id, run.due)
        return RunHandle(self, run)

    async def history_access(self) -> tuple[AbstractConnection, str]:
        """The connection (made if need be) and the history stream, declared once (no worker
        may have run yet), for run handles."""
        await self.connect()
        assert self._connection is not None
        if not self._history_declared:
            # A stream declared with other retention stays as it is (declare_history warns).
            await declare_history(self._connection, self._names, self.settings)
            self._history_declared = True
        return self._connection, self._names.history_stream

    async def cancel_access(self) -> tuple[AbstractChannel, Names]:
        """A channel with confirms and the names, with the cancels stream declared once, for
        a run handle's ``cancel``."""
        await self.history_access()
        assert self._connection is not None and self._channel is not None
        if not self._cancels_declared:
            await declare_cancels(self._connection, self._names)
            self._cancels_declared = True
        return self._channel, self._names

    async def enqueue(
        self, task: str, payload: Any = None, **options: Unpack[EnqueueOptions]
    ) -> Enqueued:
        """Send one task to run now, ``at`` a time or after a ``delay``; returns its run id.

        Returns once the broker confirmed it. With a ``key`` used before, nothing is sent and
        ``created`` is False. Raises ``EnqueueError`` or ``PlanError`` for bad arguments,
        ``BrokerUnavailable`` when the broker cannot be reached or fails under the call.
        """
        now = utcnow()
        envelope = one_off(task, payload, options, now)
        plan = plan_of(options, self._default)
        with broker_failures(f"the enqueue of {task!r}"):
            await self.connect()
            key = options.get("key")
            if key is not None and not await self._claim(key, envelope.run_id):
                return Enqueued(envelope.run_id, None, created=False)
            await self._send(envelope, plan, envelope.scheduled_for > now, key)
        return Enqueued(envelope.run_id, envelope.scheduled_for)

    async def _send(
        self, envelope: Envelope, plan: RetryPlan, delayed: bool, key: str | None
    ) -> None:
        """Send the task; when that fails, recover the channel and free the key, unless the
        caller gave up (a cancel) after the task's publish began: it may reach the broker
        still, so the key stays taken and a retry with it cannot send the task twice."""
        assert self._publisher is not None
        sending = False
        try:
            await self._publisher.prepare(plan, delayed)
            sending = True
            await self._publisher.send(envelope, plan, delayed)
        except BaseException as error:
            maybe_sent = sending and isinstance(error, asyncio.CancelledError)
            with suppress(Exception):
                await self._recover(None if maybe_sent else key)
            raise

    async def _claim(self, key: str, run_id: str) -> bool:
        assert self._keys is not None
        return await self._keys.claim(key, run_id)

    async def _recover(self, key: str | None) -> None:
        """After a failed send: a fresh channel if the broker closed this one (a declaration
        it refused does), then the key freed so that the caller may try again. The channel
        is the client's own (``owned_publish_channel``): a robust one reopened itself beside
        the fresh one, a channel more for each refused enqueue."""
        await self.connect()
        if key is not None and self._keys is not None:
            await self._keys.release(key)
