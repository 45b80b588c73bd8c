"""Trigger, pause and resume a schedule, file or runtime alike: what ``warren schedules``, the
HTTP API and the dashboard all do.

Each action names who asked (``by``) and writes its event to the history; the writes
themselves are ``topology/schedules/commands.py``'s (the control stream, the task queue).
A monitor that acts passes its live views of the control stream (``PauseView``): a pause or
resume returns once every view holds it, so the page or answer after it shows the change.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from aio_pika.abc import AbstractConnection

from warren_cron.errors import ScheduleNotFound
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.names import Names
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules import commands
from warren_cron.schedules.control import Pause
from warren_cron.schedules.schedule import Schedule, build_schedule
from warren_cron.store.admin import ScheduleAdmin

#: How long a pause or resume waits for the views to follow it: the control stream is
#: followed live, within a second, so this is only reached when the broker is in trouble.
FOLLOW_SECONDS = 3.0


class PauseView(Protocol):
    """A live fold of the control stream: its pauses, and an event set when they change."""

    @property
    def pauses(self) -> Mapping[str, Pause]:
        """The pauses followed so far, by schedule name."""

    @property
    def pauses_changed(self) -> asyncio.Event:
        """Set whenever pauses are folded in."""


@dataclass(frozen=True, slots=True)
class Triggered:
    """A run published now: its schedule and run id."""

    name: str
    run_id: str


@dataclass(frozen=True, slots=True)
class Paused:
    """A pause asked for: ``already`` is the pause the schedule had (and nothing was sent)."""

    name: str
    already: Pause | None = None

    @property
    def changed(self) -> bool:
        """Whether this pause was sent (the schedule was not paused)."""
        return self.already is None


@dataclass(frozen=True, slots=True)
class Resumed:
    """A resume asked for: ``changed`` False when the schedule was not paused (nothing sent)."""

    name: str
    changed: bool
    catch_up: bool = False


async def live_schedule(
    name: str,
    file: Mapping[str, Schedule],
    store: ScheduleAdmin | None,
    settings: CronSettings,
) -> Schedule:
    """The file's schedule ``name``, else the live runtime one read from the store now;
    ``ScheduleNotFound`` for neither (archived, unknown, or no store)."""
    schedule = file.get(name)
    if schedule is not None:
        return schedule
    if store is None:
        raise ScheduleNotFound(f"no schedule {name!r} in CRON_SCHEDULES_FILE")
    return build_schedule(await store.live_spec(name), settings)


async def trigger_schedule(
    connection: AbstractConnection,
    settings: CronSettings,
    schedule: Schedule,
    history: HistoryPublisher,
    by: str,
    reason: str | None = None,
) -> Triggered:
    """Publish one run of ``schedule`` now, paused or not, as a fire would be."""
    run_id = await commands.trigger(connection, settings, schedule, history, by, reason)
    return Triggered(schedule.name, run_id)


async def pause_schedule(
    connection: AbstractConnection,
    names: Names,
    name: str,
    history: HistoryPublisher,
    by: str,
    reason: str,
    *,
    views: Sequence[PauseView] = (),
) -> Paused:
    """Pause schedule ``name`` unless it is paused already; once sent, wait until ``views``
    hold it."""
    already = await commands.pause(connection, names, name, history, by, reason)
    if already is None:
        await followed(views, name, paused=True)
    return Paused(name, already)


async def resume_schedule(
    connection: AbstractConnection,
    names: Names,
    name: str,
    history: HistoryPublisher,
    by: str,
    *,
    catch_up: bool = False,
    reason: str | None = None,
    views: Sequence[PauseView] = (),
) -> Resumed:
    """Resume schedule ``name`` if it is paused (the fires missed while paused under its
    catch_up policy if asked); once sent, wait until ``views`` hold it."""
    sent = await commands.resume(
        connection, names, name, history, by, catch_up=catch_up, reason=reason
    )
    if sent:
        await followed(views, name, paused=False)
    return Resumed(name, sent, catch_up)


def views_of(*views: PauseView | None) -> list[PauseView]:
    """The views a monitor keeps (a store it does not follow is None)."""
    return [view for view in views if view is not None]


async def followed(
    views: Sequence[PauseView], name: str, *, paused: bool, seconds: float = FOLLOW_SECONDS
) -> bool:
    """Wait (``seconds`` at most) until each of ``views`` holds schedule ``name`` as
    ``paused`` or not; whether they all did. Each view follows the control stream on its
    own, so each is waited for."""
    deadline = time.monotonic() + seconds
    while True:
        for view in views:
            view.pauses_changed.clear()
        if all((name in view.pauses) == paused for view in views):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        await _any_set([view.pauses_changed for view in views], left)


async def _any_set(events: list[asyncio.Event], seconds: float) -> None:
    """Until one of ``events`` is set, or ``seconds`` passed."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    _, pending = await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    for wait in pending:
        wait.cancel()
