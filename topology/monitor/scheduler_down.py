"""The ``scheduler.down`` alert: no scheduler leads, or the leader falls behind its fires.

The monitor follows ``<ns>_scheduler.beats`` live (``topology/schedules/heartbeats.py``) and,
every few seconds, looks whether the leader queue is held (has an active consumer). No leader
(the queue free, or held with no beat) for ``CRON_SCHEDULER_DOWN_SECONDS``, or a leader more than
``CRON_SCHEDULER_LAG_ALERT_SECONDS`` behind, fires the condition; a leader beating on time
resolves it. While the leader queue is held but no beat came for half of
``CRON_SCHEDULER_DOWN_SECONDS``, the beats are read again before anything is concluded: the
consumer may be stuck (``topology/schedules/beat_follow.py``), and a live scheduler would be
called down.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

import structlog
from aio_pika.abc import AbstractConnection

from warren_cron.monitor.alerts import Condition
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.names import Names
from warren_cron.runtime.metrics import SCHEDULER_LAG, SCHEDULERS
from warren_cron.schedules.beat_follow import BeatFollower
from warren_cron.schedules.heartbeats import Beat, SchedulerView, leader_held

log = structlog.get_logger("monitor")
#: The condition's key, and the event type of the signed event webhook.
SCHEDULER_DOWN = "scheduler.down"


class SchedulerWatch:
    """Follows the beats; ``check`` returns the ``scheduler.down`` change, if any."""

    def __init__(
        self, settings: MonitorSettings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings = settings
        self.names = Names(settings.namespace)
        self._follower = BeatFollower(self.names)
        #: The latest look: what the dashboard shows. None before the first check.
        self.view: SchedulerView | None = None
        self._clock = clock
        self._unhealthy_since: float | None = None
        self._firing = False

    @property
    def firing(self) -> bool:
        """True while the ``scheduler.down`` alert is firing."""
        return self._firing

    @property
    def beats(self) -> dict[str, Beat]:
        """Each scheduler's latest beat."""
        return self._follower.beats

    async def start(self, connection: AbstractConnection) -> None:
        """Follow the beat stream from its latest beats on."""
        await self._follower.start(connection)

    async def check(self, connection: AbstractConnection, now: datetime) -> list[Condition]:
        """Look at the leader queue; the change of ``scheduler.down``, if there is one."""
        held = await leader_held(connection, self.names, self.settings.scheduler_partitions)
        if held and self._follower.quiet_seconds() > self.settings.scheduler_down_seconds / 2:
            await self._read_again(connection)
        view = SchedulerView(held, self.beats, now)
        self.view = view
        self._gauges(view)
        problem = self._problem(view)
        if (problem is not None) == self._firing:
            return []
        self._firing = problem is not None
        return [
            Condition(SCHEDULER_DOWN, self._firing, problem or f"scheduler back: {view.line()}")
        ]

    async def _read_again(self, connection: AbstractConnection) -> None:
        """Follow the beats anew: a scheduler holds the leader queue, yet none came."""
        log.warning(
            "no scheduler beat came although the leader queue is held; reading the beats again",
            quiet_s=round(self._follower.quiet_seconds(), 1),
        )
        await self._follower.start(connection)

    def _problem(self, view: SchedulerView) -> str | None:
        """Why the condition fires now, or None."""
        leader, settings = view.leader, self.settings
        if leader is not None and leader.lag_seconds > settings.scheduler_lag_alert_seconds:
            return (
                f"{view.line()}: fires are published {leader.lag_seconds:.0f}s late "
                f"(threshold {settings.scheduler_lag_alert_seconds:g}s); is the broker blocking?"
            )
        if leader is not None and not view.unled:  # with partitions: every one of them led
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
