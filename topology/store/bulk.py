"""Many creates at once (``ScheduleAdmin.create_many``): every spec checked before any write,
``IN_FLIGHT`` writes at a time, each outcome in the order given, and a broker failing under
them answered per schedule (``CreatesCut``) rather than by the first error alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from warren_cron.errors import (
    BROKER_TROUBLE,
    CreatesCut,
    InvalidSchedule,
    NameTaken,
    StoreError,
    Unconfirmed,
    VersionConflict,
)
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.stored import StoredSchedule

#: Creates written before the first is read back: each is a publish confirmed and read
#: back, so one at a time is held to the broker's round trip.
IN_FLIGHT = 200
#: A create failed by these may be stored or not (the store not read back in time too).
UNCONFIRMED: tuple[type[BaseException], ...] = (*BROKER_TROUBLE, StoreError)
#: Writes one create, as the admin does.
Create = Callable[[ScheduleSpec], Awaitable[StoredSchedule]]


def no_repeats(specs: list[ScheduleSpec]) -> None:
    """``InvalidSchedule`` for the first name given twice."""
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise InvalidSchedule(spec.name, ["name: given twice in one create_many"])
        seen.add(spec.name)


async def create_all(
    specs: list[ScheduleSpec], create: Create
) -> list[StoredSchedule | StoreError]:
    """Each spec's outcome, in order: created, or the refusal (a live schedule has the
    name); ``CreatesCut`` with them all when the broker left any unconfirmed."""
    window = asyncio.Semaphore(IN_FLIGHT)

    async def one(spec: ScheduleSpec) -> StoredSchedule | StoreError:
        async with window:
            try:
                return await create(spec)
            except (NameTaken, VersionConflict) as refused:
                return refused
            except InvalidSchedule:
                raise
            except UNCONFIRMED as error:
                return Unconfirmed(spec.name, error)

    results = list(await asyncio.gather(*(one(spec) for spec in specs)))
    if any(isinstance(result, Unconfirmed) for result in results):
        raise CreatesCut(results)
    return results
