"""What the API keeps beside the dashboard: its tokens, the runtime schedules it reads and
changes (a ``ScheduleAdmin`` following the store live, with or without tokens: the pages show
them as ``warren status`` does), and a client to enqueue tasks."""

from __future__ import annotations

from aio_pika.abc import AbstractConnection

from warren_cron.client.client import Client
from warren_cron.monitor.api_tokens import Caller, TokenTable
from warren_cron.monitor.console.known_tasks import KnownTasksEar
from warren_cron.monitor.console.run_waiters import RunWaiters
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.names import Names
from warren_cron.store.admin import ScheduleAdmin


class ApiState:
    """The API's tokens and the runtime schedules' store, followed whatever the tokens."""

    def __init__(self, settings: MonitorSettings) -> None:
        self.tokens = TokenTable(settings.api_tokens)
        # Followed without tokens too: an open dashboard is read-only, yet it must count and
        # show the runtime schedules the command created, as warren status does.
        self._admin: ScheduleAdmin | None = ScheduleAdmin(settings)
        #: Enqueues ``POST /runs``'s tasks; it connects at the first one.
        self.client = Client(settings, name="warren-api")
        #: Calls of ``GET /runs/{id}?wait=`` waiting on their run's end.
        self.waiters = RunWaiters()
        #: The tasks the live workers announce, which ``POST /runs`` checks a task against.
        self.known_tasks = KnownTasksEar(Names(settings.namespace))

    @property
    def has_store(self) -> bool:
        """Whether the monitor follows the runtime schedules."""
        return self._admin is not None

    @property
    def store(self) -> ScheduleAdmin | None:
        """The runtime schedules followed, None when they are not."""
        return self._admin

    @property
    def admin(self) -> ScheduleAdmin:
        """The runtime schedules."""
        assert self._admin is not None, "the API has no tokens"
        return self._admin

    def match(self, token: str) -> Caller | None:
        """The caller a bearer token belongs to, if any."""
        return self.tokens.match(token)

    async def start(self, connection: AbstractConnection) -> None:
        """Hear the workers' tasks; read the store and follow it."""
        await self.known_tasks.start(connection)
        if self._admin is not None:
            await self._admin.start(connection)

    async def close(self) -> None:
        """Stop following the store; close the client's connection."""
        await self.client.close()
        await self.known_tasks.close()
        if self._admin is not None:
            await self._admin.close()
