"""The dashboard served by the monitor: its state, and the web server's start and stop.

It reads what the monitor already keeps (the status fold and the pauses, followed live), the
failed queue through its index, the last day's activity from the history stream, and queue
depths and run stories from the broker on each request. It acts through the operations
the command and the HTTP API call (``warren_cron.ops``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import Callable, Sequence
from typing import Any

import structlog
from aio_pika.abc import AbstractRobustConnection
from aiohttp import web

from warren_cron.clock import utcnow
from warren_cron.errors import BROKER_TROUBLE
from warren_cron.history.events import Event
from warren_cron.history.follow import StreamFollower
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.monitor.api.state import ApiState
from warren_cron.monitor.dashboard import pages
from warren_cron.monitor.dashboard.activity import DAY, Activity
from warren_cron.monitor.dashboard.app import create_app
from warren_cron.monitor.dashboard.auth import Auth, Refused
from warren_cron.monitor.dashboard.failed_index import FailedIndex
from warren_cron.monitor.dashboard.flow import FlowSeen
from warren_cron.monitor.dashboard.offsets import OffsetIndex
from warren_cron.monitor.dashboard.pages.login import readers_only
from warren_cron.monitor.dashboard.recent import RecentRuns
from warren_cron.monitor.dashboard.render import Notes, environment, render
from warren_cron.monitor.dashboard.throttle import LoginThrottle
from warren_cron.monitor.scheduler_down import SchedulerWatch
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.monitor.status_keeper import StatusKeeper
from warren_cron.names import Names
from warren_cron.ops.scans import ScanGate
from warren_cron.runtime.process import port_taken
from warren_cron.schedules.schedule import Schedule

log = structlog.get_logger("dashboard")


class Dashboard:
    """What the pages read and act with; ``start`` serves them on CRON_DASHBOARD_PORT."""

    def __init__(
        self,
        settings: MonitorSettings,
        schedules: Sequence[Schedule],
        keeper: StatusKeeper,
        plan_keys: Callable[[], set[str]],
        schedulers: SchedulerWatch | None = None,
    ) -> None:
        self.settings = settings
        self.names = Names(settings.namespace)
        self.schedules = list(schedules)
        self.by_name = {schedule.name: schedule for schedule in schedules}
        self.keeper = keeper
        self.plan_keys = plan_keys
        #: The monitor's scheduler liveness watch, when the dashboard runs in a monitor.
        self.schedulers = schedulers
        self.activity = Activity()
        self.flow = FlowSeen()
        self.recent = RecentRuns()
        self.offsets = OffsetIndex()
        #: Reads of the history stream requests ask for: bounded in number and in events.
        self.scans = ScanGate(settings.history_scans, settings.history_scan_events)
        self.failed = FailedIndex(self.names, settings.dashboard_refresh_seconds)
        token = settings.dashboard_token
        throttle = LoginThrottle(
            settings.dashboard_login_failures, settings.dashboard_lockout_seconds
        )
        self.api = ApiState(settings)
        secret = None if token is None else token.get_secret_value()
        self.auth = Auth(
            secret,
            throttle,
            self.api.match if self.api.tokens else None,
            anonymous_read=settings.dashboard_anonymous_read,
            session_seconds=settings.dashboard_session_seconds,
        )
        self.notes = Notes()
        self.env = environment()
        self.url: str | None = None
        self._connection: AbstractRobustConnection | None = None
        self._history: HistoryPublisher | None = None
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._runner: web.AppRunner | None = None
        self._follower: StreamFollower | None = None

    @property
    def connection(self) -> AbstractRobustConnection:
        """The monitor's broker connection."""
        assert self._connection is not None, "the dashboard has not started"
        return self._connection

    @property
    def history(self) -> HistoryPublisher:
        """Where the dashboard's actions write their events."""
        assert self._history is not None, "the dashboard has not started"
        return self._history

    def page(
        self, request: web.Request, name: str, status: int = 200, **context: Any
    ) -> web.Response:
        """Render template ``name`` for ``request``."""
        return render(request, self.env, self.auth, self.notes, name, status, **context)

    def refusal(
        self, request: web.Request, name: str, refused: Refused, **context: Any
    ) -> web.Response:
        """Render template ``name`` for a refusal, with its status and headers (``Retry-After``)."""
        page = self.page(request, name, refused.status, **context)
        page.headers.update(refused.headers)
        return page

    async def start(self, connection: AbstractRobustConnection) -> None:
        """Follow the last day of history, index the failed queue, and serve the pages."""
        self._connection = connection
        self._history = HistoryPublisher(self.names, self.settings, "dashboard")
        await self._history.start(connection)
        since = utcnow() - DAY
        follower = StreamFollower(self.names.history_stream, self._on_history, since=since)
        self._follower = follower
        await follower.start(connection)
        await self.api.start(connection)
        self._tasks.append(asyncio.create_task(self.failed.run(connection, self._stop)))
        app = create_app(pages.ROUTES, [readers_only])
        self._runner = web.AppRunner(app, access_log=None)
        self._runner.app[pages.DASHBOARD] = self
        await self._runner.setup()
        host, port = self.settings.dashboard_host, self.settings.dashboard_port
        try:
            await web.TCPSite(self._runner, host, port).start()
        except OSError as error:
            await self.stop()  # what started before: the readers would die with the loop
            raise port_taken("CRON_DASHBOARD_PORT", f"{host}:{port}", error) from None
        self.url = f"http://{host}:{port}/"
        mode = "open and read-only" if self.auth.read_only else "pages and actions need a token"
        if self.auth.access.anonymous_read:
            mode = "pages open to anyone, actions need a token"
        log.info("dashboard serving", url=self.url, mode=mode)
        if self.auth.read_only and not loopback(host):
            log.warning(
                "dashboard open to the network: no token is set (CRON_API_TOKENS), so anyone "
                "who reaches this address reads every page, failed payloads included",
                url=self.url,
            )

    def _on_history(self, events: list[Event], offset: int) -> None:
        self.activity.on_events(events, offset)
        self.flow.on_events(events, offset)
        self.recent.on_events(events, offset)
        self.offsets.on_events(events, offset)
        self.api.waiters.on_events(events, offset)  # last: a woken call reads the runs above

    async def stop(self) -> None:
        """Stop serving and reading; events of actions still buffered are sent."""
        self._stop.set()
        # First: the server waits up to a minute for requests under way (a read, a long poll).
        await self.scans.close()
        self.api.waiters.close()
        if self._runner is not None:
            await self._runner.cleanup()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # Shutting down: a broker already gone must not keep the monitor from stopping.
        with contextlib.suppress(*BROKER_TROUBLE):
            if self._follower is not None:
                await self._follower.stop()
            await self.api.close()
            if self._history is not None:
                await self._history.close()


def loopback(host: str) -> bool:
    """Whether ``host`` is reached only from this machine (127.0.0.1, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any address
        return False
