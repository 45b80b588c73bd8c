"""The ``scheduler.down`` alert: no scheduler leads, or the leader falls behind its fires.

The monitor follows ``<ns>_scheduler.beats`` live (``topology/schedules/heartbeats.py``) and,
every few seconds, looks whether the leader queue is held (has an active consumer). No leader
(the queue free, or held with no beat) for ``CRON_SCHEDULER_DOWN_SECONDS``, or a leader more than
``CRON_SCHEDULER_LAG_ALERT_SECONDS`` behind, fires the condition; a leader beating on time
resolves it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractIncomingMessage,
    AbstractQueue,
)

from warren_cron.history.reader import consuming, last_offset, stream_offset
from warren_cron.monitor.alerts import Condition
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.names import Names
from warren_cron.runtime.metrics import SCHEDULER_LAG, SCHEDULERS
from warren_cron.schedules.heartbeats import (
    RECENT_BEATS,
    Beat,
    SchedulerView,
    declare_beats,
    decode_beat,
    latest_by_scheduler,
    leader_held,
)

#: The condition's key, and the event type of the signed event webhook.
SCHEDULER_DOWN = "scheduler.down"


class SchedulerWatch:
    """Follows the beats; ``check`` returns the ``scheduler.down`` change, if any."""

    def __init__(
        self, settings: MonitorSettings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self.names = Names(settings.namespace)
        self.beats: dict[str, Beat] = {}
        #: The latest look: what the dashboard shows. None before the first check.
        self.view: SchedulerView | None = None
        self._clock = clock
        self._unhealthy_since: float | None = None
        self._firing = False
        self._queue: AbstractQueue | None = None
        self._arguments: dict[str, Any] = {}

    @property
    def firing(self) -> bool:
        """True while the ``scheduler.down`` alert is firing."""
        return self._firing

    async def start(self, connection: AbstractConnection) -> None:
        """Follow the beat stream from its latest beats on."""
        await declare_beats(connection, self.names)
        await consuming(connection, self._follow)

    async def _follow(self, channel: AbstractChannel) -> None:
        """Consume the beats from a few before the stream's end."""
        await channel.set_qos(prefetch_count=100)
        end = await last_offset(channel, self.names.beat_stream)
        start: int | str = "next" if end is None else max(0, end.offset - RECENT_BEATS)
        # Declared (passively), so the robust channel consumes again after a reconnect, from
        # the offset after the last beat read (the arguments are kept up to date).
        self._queue = await channel.declare_queue(self.names.beat_stream, passive=True)
        self._arguments["x-stream-offset"] = start
        await self._queue.consume(self._on_beat, arguments=self._arguments)

    async def _on_beat(self, message: AbstractIncomingMessage) -> None:
        self._arguments["x-stream-offset"] = stream_offset(message) + 1
        beat = decode_beat(message.body)
        if beat is not None:
            latest_by_scheduler([beat], self.beats)
        await message.ack()

    async def check(self, connection: AbstractConnection, now: datetime) -> list[Condition]:
        """Look at the leader queue; the change of ``scheduler.down``, if there is one."""
        view = SchedulerView(await leader_held(connection, self.names), self.beats, now)
        self.view = view
        self._gauges(view)
        problem = self._problem(view)
        if (problem is not None) == self._firing:
            return []
        self._firing = problem is not None
        return [
            Condition(SCHEDULER_DOWN, self._firing, problem or f"scheduler back: {view.line()}")
        ]

    def _problem(self, view: SchedulerView) -> str | None:
        """Why the condition fires now, or None."""
        leader, settings = view.leader, self.settings
        if leader is not None and leader.lag_seconds > settings.scheduler_lag_alert_seconds:
            return (
                f"{view.line()}: fires are published {leader.lag_seconds:.0f}s late "
                f"(threshold {settings.scheduler_lag_alert_seconds:g}s); is the broker blocking?"
            )
        if leader is not None:
            self._unhealthy_since = None
            return None
        now = self._clock()
        if self._unhealthy_since is None:
            self._unhealthy_since = now
        down_for = now - self._unhealthy_since
        if down_for < settings.scheduler_down_seconds:
            return None
        return f"{view.line()} for {down_for:.0f}s; start warren scheduler"

    def _gauges(self, view: SchedulerView) -> None:
        leader = view.leader
        SCHEDULERS.labels(role="leading").set(0 if leader is None else 1)
        SCHEDULERS.labels(role="standby").set(len(view.standbys))
        SCHEDULER_LAG.set(0.0 if leader is None else leader.lag_seconds)
