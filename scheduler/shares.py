"""Which partitions a scheduler keeps: a schedule's partition, each scheduler's share of
the partitions, and the agreement on their count (the rule ``scheduler/leases.py`` spreads
the partitions by, from the beats)."""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from datetime import datetime

import structlog
from aio_pika.abc import AbstractConnection

from warren_cron.clock import utcnow
from warren_cron.names import Names
from warren_cron.schedules.heartbeats import Beat, latest_by_scheduler, recent_beats

log = structlog.get_logger("scheduler")


def partition_of(name: str, count: int) -> int:
    """The partition of the schedule called ``name``: fixed for as long as ``count`` is."""
    return 0 if count == 1 else zlib.crc32(name.encode()) % count


def to_give_up(
    led: set[int], me: str, beats: Mapping[str, Beat], count: int, now: datetime
) -> list[int]:
    """The partitions this scheduler leads beyond its share while another leads fewer than
    theirs (live schedulers of the same partition count, from their beats)."""
    return beyond_share(led, live_peers(beats, me, count, now), count)


def beyond_share(led: set[int], live: Mapping[str, Beat], count: int) -> list[int]:
    """``to_give_up`` with the live peers known."""
    share = share_of(count, len(live))
    # Another below the share, not below count // N: 4, 2 and 2 of 8 is stuck under the
    # latter (none below 2), and the one at 4 must give one up.
    if len(led) <= share or not any(len(b.partitions) < share for b in live.values()):
        return []
    return sorted(led)[share:]


def live_peers(beats: Mapping[str, Beat], me: str, count: int, now: datetime) -> dict[str, Beat]:
    """The other live schedulers of the same partition count, from their beats."""
    live = {b.scheduler: b for b in beats.values() if b.partition_count == count and b.fresh(now)}
    live.pop(me, None)
    return live


def share_of(count: int, peers: int) -> int:
    """The partitions each of ``peers`` + 1 schedulers leads at most when spread."""
    return math.ceil(count / (peers + 1))


def disagreeing(beats: Mapping[str, Beat], count: int, now: datetime) -> list[str]:
    """Live leading schedulers that split the schedules into another count of partitions."""
    return sorted(
        b.scheduler
        for b in beats.values()
        if b.leading and b.fresh(now) and b.partition_count != count
    )


async def agreed(connection: AbstractConnection, names: Names, count: int) -> bool:
    """False (logged) while a live leader splits the schedules otherwise: leading beside
    it would fire the same schedules twice."""
    beats = latest_by_scheduler(await recent_beats(connection, names))
    others = disagreeing(beats, count, utcnow())
    if others:
        log.error(
            "not leading: other schedulers of the namespace lead with another "
            "CRON_SCHEDULER_PARTITIONS; set one value on every scheduler",
            partitions=count,
            others=others,
        )
    return not others
