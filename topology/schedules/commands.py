"""Trigger, pause and resume a schedule: what ``warren schedules`` and the dashboard both do.

Each command says who asked (``by``) and may say why (``reason``); each writes its event to
the history. Pause and resume append to the control stream, the pause state itself, and
answer ``False`` when there was nothing to do (paused already, or not paused).
"""

from __future__ import annotations

from aio_pika.abc import AbstractConnection

from warren_cron.broker.connect import publish_channel
from warren_cron.clock import utc_text, utcnow
from warren_cron.declare import declare_topology
from warren_cron.history.events import event
from warren_cron.history.publisher import HistoryPublisher
from warren_cron.names import Names
from warren_cron.publish import TaskPublisher
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.control import Pause, read_pauses, send_command
from warren_cron.schedules.schedule import Schedule


async def trigger(
    connection: AbstractConnection,
    settings: CronSettings,
    schedule: Schedule,
    history: HistoryPublisher,
    by: str,
    reason: str | None = None,
) -> str:
    """Publish one run of ``schedule`` now, confirmed, as a fire would be; its run id."""
    names, now = Names(settings.namespace), utcnow()
    envelope = schedule.envelope(now, run_id=schedule.manual_run_id(now))
    channel = await publish_channel(connection)
    try:
        topology = await declare_topology(channel, names, settings)
        tasks = TaskPublisher(channel, topology.tasks, names, settings.queue_type)
        await tasks.publish(envelope, schedule.plan)
    finally:
        await channel.close()
    # Stamped with the trigger's time: the run may end before the confirm comes back.
    fired = schedule.event(
        "triggered",
        envelope.run_id,
        utc_text(now),
        at=now,
        plan=schedule.routing_key,
        by=by,
    )
    history.emit({**fired, **({"reason": reason} if reason else {})})
    return envelope.run_id


async def pause(
    connection: AbstractConnection,
    names: Names,
    name: str,
    history: HistoryPublisher,
    by: str,
    reason: str,
) -> Pause | None:
    """Pause schedule ``name``; the pause it already had (and nothing sent), else None."""
    already = (await read_pauses(connection, names)).get(name)
    if already is not None:
        return already
    command = event("paused", schedule=name, by=by, reason=reason)
    await send_command(connection, names, command)
    history.emit(command)
    return None


async def resume(
    connection: AbstractConnection,
    names: Names,
    name: str,
    history: HistoryPublisher,
    by: str,
    *,
    catch_up: bool = False,
    reason: str | None = None,
) -> bool:
    """Resume schedule ``name``; False (and nothing sent) when it was not paused."""
    if name not in await read_pauses(connection, names):
        return False
    command = event("resumed", schedule=name, by=by, catch_up=catch_up, reason=reason)
    await send_command(connection, names, command)
    history.emit(command)
    return True


def describe(pause: Pause) -> str:
    """``since <time> by <who>: <reason>``."""
    return f"since {utc_text(pause.since)} by {pause.by}: {pause.reason}"
