"""What the monitor keeps for its dashboard and API, without any web code: the readers of the
history, the failed queue's index, the runtime schedules' store, and the broker connection
the operations (``warren_cron.ops``) act with.

It reads what the monitor already keeps (the status fold and the pauses, followed live), the
failed queue through its index, and the last day's activity from the history stream; the
web part (``monitor/web/``) adds the login and the templates, and ``monitor/mount.py`` serves.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

from aio_pika.abc import AbstractRobustConnection

from warren_cron.clock import utcnow
from warren_cron.errors import BROKER_TROUBLE
from warren_cron.history.events import Event
from warren_cron.history.follow import StreamFollower
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.monitor.console.activity import DAY, Activity
from warren_cron.monitor.console.api_state import ApiState
from warren_cron.monitor.console.failed_index import FailedIndex
from warren_cron.monitor.console.flow import FlowSeen
from warren_cron.monitor.console.long_runs import LongRunsSeen
from warren_cron.monitor.console.offsets import OffsetIndex
from warren_cron.monitor.console.recent import RecentRuns
from warren_cron.monitor.scheduler_down import SchedulerWatch
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.monitor.status_keeper import StatusKeeper
from warren_cron.names import Names
from warren_cron.ops.scans import ScanGate
from warren_cron.schedules.schedule import Schedule


class DashboardState:
    """What the pages and the API read and act with; ``start_reading`` follows the broker."""

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
        self.long_runs = LongRunsSeen()
        self.offsets = OffsetIndex()
        #: Reads of the history stream requests ask for: bounded in number and in events.
        self.scans = ScanGate(settings.history_scans, settings.history_scan_events)
        self.failed = FailedIndex(self.names, settings.dashboard_refresh_seconds)
        self.api = ApiState(settings)
        self._connection: AbstractRobustConnection | None = None
        self._history: HistoryPublisher | None = None
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
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

    async def start_reading(self, connection: AbstractRobustConnection) -> None:
        """Follow the last day of history, the runtime schedules and the failed queue."""
        self._connection = connection
        self._history = HistoryPublisher(self.names, self.settings, "dashboard")
        await self._history.start(connection)
        since = utcnow() - DAY
        follower = StreamFollower(self.names.history_stream, self._on_history, since=since)
        self._follower = follower
        await follower.start(connection)
        await self.api.start(connection)
        self._tasks.append(asyncio.create_task(self.failed.run(connection, self._stop)))

    def _on_history(self, events: list[Event], offset: int) -> None:
        self.activity.on_events(events, offset)
        self.flow.on_events(events, offset)
        self.recent.on_events(events, offset)
        self.long_runs.on_events(events, offset)
        self.offsets.on_events(events, offset)
        self.api.waiters.on_events(events, offset)  # last: a woken call reads the runs above

    async def end_requests(self) -> None:
        """Answer what waits now: reads of the stream refused, long polls woken."""
        self._stop.set()
        await self.scans.close()
        self.api.waiters.close()

    async def stop_reading(self) -> None:
        """Stop reading; events of actions still buffered are sent."""
        self._stop.set()
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
