"""The retry plans a namespace may have queues for, when no management API lists them.

A plan's retry queue (``<ns>_scheduler_retry.<plan>``) and landing queue
(``<ns>_delay.land.<plan>``) exist once a task with it was published. The plans known
without listing the broker: the CRON_* default, the schedules file's, the runtime store's,
those named in the failed records, and those the caller gives; each with every plan it
passes through as its retries are spent.
"""

from __future__ import annotations

from collections.abc import Iterable

from aio_pika.abc import AbstractConnection

from warren_cron.broker.depths import failed_plan_keys
from warren_cron.broker.inspect import counts
from warren_cron.errors import ConfigError
from warren_cron.names import FINAL_KEY, Names
from warren_cron.plan import RetryPlan
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.load import configured_schedules
from warren_cron.schedules.schedule import build_schedule
from warren_cron.store.admin import ScheduleAdmin


async def known_plan_keys(
    connection: AbstractConnection, settings: CronSettings, given: Iterable[str]
) -> set[str]:
    """Every plan key the namespace of ``settings`` is known to use, and their suffixes."""
    plans = [settings.default_plan(), *map(RetryPlan.from_key, given), *file_plans(settings)]
    plans += await stored_plans(connection, settings)
    keys = {step.key for plan in plans for step in plan.suffixes()} | {FINAL_KEY}
    if await counts(connection, Names(settings.namespace).failed_queue) is not None:
        keys |= await failed_plan_keys(connection, Names(settings.namespace))
    return keys


def file_plans(settings: CronSettings) -> list[RetryPlan]:
    """The plans of CRON_SCHEDULES_FILE's schedules; none when it is absent or invalid (a
    teardown goes on without them)."""
    try:
        found = configured_schedules(settings)
    except ConfigError:
        return []
    return list(found.plans().values()) if found else []


async def stored_plans(connection: AbstractConnection, settings: CronSettings) -> list[RetryPlan]:
    """The plans of the runtime store's schedules, archived ones too; none without a store."""
    names = Names(settings.namespace)
    # Reading declares the store's streams: where one is missing there is nothing to read,
    # and a survey must not create what it looks for.
    for name in (names.store_log, names.store_snapshot, names.control_stream):
        if await counts(connection, name) is None:
            return []
    try:
        admin = ScheduleAdmin(settings)
    except ConfigError:
        return []  # it reads the schedules file, which cannot be read: leave the store out
    try:
        await admin.start(connection)
        stored = await admin.list(sync=False)
    finally:
        await admin.close()
    plans = []
    for item in stored:
        try:
            plans.append(build_schedule(item.spec, settings, since=item.since).plan)
        except ConfigError:
            continue  # a spec this version reads no more: its plan is unknown
    return plans
