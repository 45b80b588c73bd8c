"""Where each minute of history begins in the stream, so that a run's story is read from
shortly before its time rather than from a stream timestamp.

A stream timestamp is the broker's time of publishing: events published in one burst (a
backlog, a restore, a benchmark's fill) share it, and a read from it may start far too
early. The dashboard follows the stream in order, so it notes, for each minute of the
events' own times (``at``), the offset of the first message holding one: about 1,440
numbers for the day it keeps.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from warren_cron.history.events import Event
from warren_cron.monitor.console.activity import DAY, minute_of


class OffsetIndex:
    """The first offset seen of each minute of events, for the last ``keep``."""

    def __init__(self, keep: timedelta = DAY) -> None:
        self._first: dict[int, int] = {}
        self._keep = int(keep.total_seconds() // 60)
        #: The oldest minute held: only partly seen, as following began or forgetting ended
        #: in it.
        self._oldest: int | None = None
        self._newest = 0

    def on_events(self, events: list[Event], offset: int) -> None:
        """Note the minutes of ``events``, held at ``offset`` (a follower's callback)."""
        for event in events:
            minute = minute_of(event.at)
            if self._oldest is None:
                self._oldest = minute
            if minute >= self._oldest and minute not in self._first:
                self._first[minute] = offset
                self._forget(minute)

    def _forget(self, minute: int) -> None:
        if minute <= self._newest:
            return
        self._newest = minute
        oldest = minute - self._keep
        if self._oldest is not None and oldest > self._oldest:
            self._oldest = oldest
            for old in [m for m in self._first if m < oldest]:
                del self._first[old]

    def offset_at(self, moment: datetime) -> int | None:
        """An offset at or before every event seen of ``moment`` or later; None when the index
        does not cover ``moment`` (before it began, or after every event it has seen)."""
        minute = minute_of(moment)
        if self._oldest is None or minute <= self._oldest:
            return None
        # A writer's late batch may hold a minute after a later one's: the earliest wins.
        return min((o for m, o in self._first.items() if m >= minute), default=None)
