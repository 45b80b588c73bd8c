"""The monitor's status fold: the history stream folded live, kept in ``<ns>_status``.

On start the monitor reads its last fold back from the one-message queue and follows the
history stream from the offset after it (from the first event when there is none), so a
restart never reads a week again. It follows the control stream too, for the pause state.
Every few seconds, when something changed, it writes the fold back (a confirmed publish)
and sets the per-schedule gauges from it, and the count of history events the fleet
reported it dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime

import structlog
from aio_pika.abc import AbstractChannel, AbstractRobustConnection

from warren_cron.broker.connect import publish_channel
from warren_cron.broker.latest import LatestMessage
from warren_cron.history.events import Event
from warren_cron.history.follow import StreamFollower
from warren_cron.history.snapshot import CONFLICT_HINT, parse_fold, status_store
from warren_cron.history.status_fold import StatusFold
from warren_cron.history.stream import declare_control, declare_history, open_stream
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.names import Names
from warren_cron.runtime.metrics import (
    HISTORY_DROPPED,
    HISTORY_LOST,
    LAST_FAILURE,
    LAST_SUCCESS,
    PAUSED,
)
from warren_cron.schedules.control import Pause, fold_pauses

log = structlog.get_logger("monitor")


class StatusKeeper:
    """Folds the history and follows the pauses; ``save`` stores the fold when it changed."""

    def __init__(self, settings: MonitorSettings, known: Iterable[str] = ()) -> None:
        self.settings = settings
        self.names = Names(settings.namespace)
        self.fold = StatusFold()
        self.pauses: dict[str, Pause] = {}
        #: When each schedule was last resumed, from the control stream.
        self.resumed: dict[str, datetime] = {}
        #: Set by anything that changes what ``save`` writes.
        self.changed = False
        #: Folds written so far: a test or a probe sees the keeper advance.
        self.saved = 0
        #: Set on each pause or resume followed: the dashboard waits on it after its own.
        self.pauses_changed = asyncio.Event()
        self._known = list(known)
        #: What ``cron_history_events_lost_total`` counts so far, by process kind.
        self._lost_exported: dict[str, int] = {}
        self._store: LatestMessage | None = None
        self._history: StreamFollower | None = None
        self._control = StreamFollower(self.names.control_stream, self._on_control)
        # The series exists from the start: the monitor's own drops are none, and say so.
        HISTORY_DROPPED.labels(process="monitor")

    @property
    def caught_up(self) -> bool:
        """True once the events both streams held at start are folded."""
        history = self._history
        return history is not None and history.caught_up and self._control.caught_up

    async def start(self, connection: AbstractRobustConnection) -> None:
        """Read the stored fold back, then follow both streams from where it ends."""
        channel = await publish_channel(connection)
        self.fold = await self._stored_fold(channel) or StatusFold()
        await declare_history(connection, self.names, self.settings)
        await declare_control(connection, self.names)
        log.info("following the history", after_offset=self.fold.offset)
        history = StreamFollower(self.names.history_stream, self._on_history, self.fold.offset)
        self._history = history
        # An empty stream takes a second to tell from a slow one: both are looked at at once.
        await asyncio.gather(history.start(connection), self._control.start(connection))
        for follower in (history, self._control):
            if follower.end_at_start is None:
                await open_stream(channel, follower.stream)

    async def _stored_fold(self, channel: AbstractChannel) -> StatusFold | None:
        store = self._store = status_store(channel, self.names, self.settings.queue_type)
        await store.declare(CONFLICT_HINT)
        body = await store.read()
        return None if body is None else parse_fold(body)

    async def stop(self) -> None:
        """Stop following; store the fold one last time."""
        for follower in (self._history, self._control):
            if follower is not None:
                await follower.stop()
        await self.save()

    async def save(self) -> None:
        """Store the fold and set the gauges, if anything changed since the last time."""
        if not self.changed or self._store is None:
            return
        self.changed = False
        self._gauges()
        try:
            await self._store.write(self.fold.dumps())
        except BaseException:
            self.changed = True  # written next time
            raise
        self.saved += 1

    def _on_history(self, events: list[Event], offset: int) -> None:
        self.fold.apply_all(events)
        # A message of no events (or none of a known schema) is passed all the same.
        self.fold.offset = max(self.fold.offset, offset)
        self.changed = True

    def _on_control(self, events: list[Event], offset: int) -> None:
        self.pauses = fold_pauses(events, self.pauses)
        for event in events:
            if event.type == "resumed" and event.schedule is not None:
                self.resumed[event.schedule] = event.at
        self.changed = True
        self.pauses_changed.set()

    def _gauges(self) -> None:
        for name in {*self._known, *self.fold.schedules, *self.pauses}:
            PAUSED.labels(schedule=name).set(1 if name in self.pauses else 0)
        for name, state in self.fold.schedules.items():
            if state.last_success_at is not None:
                LAST_SUCCESS.labels(schedule=name).set(state.last_success_at.timestamp())
            if state.last_failure_at is not None:
                LAST_FAILURE.labels(schedule=name).set(state.last_failure_at.timestamp())
        self._export_lost()

    def _export_lost(self) -> None:
        # The counter starts at the stored fold's count: across a restart it goes on from
        # where it was (or above), which Prometheus reads as no reset.
        for process, total in self.fold.lost.items():
            exported = self._lost_exported.get(process, 0)
            if total > exported:
                HISTORY_LOST.labels(process=process).inc(total - exported)
                self._lost_exported[process] = total
