"""Scheduler liveness: the heartbeats schedulers publish and what a reader makes of them.

Every scheduler, leading or standing by, appends a small beat to the stream
``<ns>_scheduler.beats`` every ``CRON_SCHEDULER_BEAT_SECONDS``: who it is, whether it leads,
when it last published fires, its next fire and how late it is. Leadership itself is the
quorum queue ``<ns>_scheduler.leader`` with a single active consumer (``scheduler/leader.py``):
a passive declare counts its active consumer only, so it tells whether someone holds it.
The two together tell a live leader from none, and an idle leader (beating, nothing due)
from a stuck one (holding the queue, not beating). A stream, not a queue, so that the
monitor and ``warren status`` can both read the same beats; it keeps an hour at most.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import orjson
from aio_pika.abc import AbstractConnection

from warren_cron.broker.exclusive import consumer_count
from warren_cron.clock import utc_text
from warren_cron.durations import relative
from warren_cron.history.reader import read_messages, stream_end
from warren_cron.history.stream import declare_stream, stream_arguments
from warren_cron.names import Names

#: The beats kept: an hour, and a few megabytes at most (a beat is ~250 bytes).
BEAT_MAX_BYTES = 2_000_000
BEAT_MAX_AGE_SECONDS = 3600
#: A beat is current for this many of its sender's intervals: one lost beat is no outage.
FRESH_INTERVALS = 3
#: How many of the latest beats a reader looks at: minutes of a handful of schedulers.
RECENT_BEATS = 300


@dataclass(frozen=True, slots=True)
class Beat:
    """One scheduler's heartbeat."""

    scheduler: str
    leading: bool
    at: datetime
    interval_seconds: float
    last_fire_at: datetime | None = None
    next_fire_at: datetime | None = None
    lag_seconds: float = 0.0
    #: How many partitions the schedules are split into, and those this scheduler leads.
    partition_count: int = 1
    partitions: tuple[int, ...] = ()
    #: Sent by a scheduler that stops: it speaks for nobody from then on.
    leaving: bool = False

    def encode(self) -> bytes:
        """The beat as the JSON body of a stream message."""
        times = {"last_fire_at": self.last_fire_at, "next_fire_at": self.next_fire_at}
        return orjson.dumps(
            {
                "v": 1,
                "scheduler": self.scheduler,
                "leading": self.leading,
                "at": utc_text(self.at),
                "interval_seconds": self.interval_seconds,
                "lag_seconds": round(self.lag_seconds, 3),
                "partition_count": self.partition_count,
                "partitions": self.partitions,
                **({"leaving": True} if self.leaving else {}),
                **{key: None if value is None else utc_text(value) for key, value in times.items()},
            }
        )

    def fresh(self, now: datetime) -> bool:
        """True while the beat still speaks for its sender (a leaving one never does: the
        others must not count a scheduler that stops, nor hand it partitions)."""
        return not self.leaving and now - self.at <= timedelta(
            seconds=self.interval_seconds * FRESH_INTERVALS
        )


def _time(value: Any) -> datetime | None:
    return None if value is None else datetime.fromisoformat(str(value))


def decode_beat(body: bytes) -> Beat | None:
    """The beat in a message body; None for anything else (a reader skips it)."""
    try:
        data = orjson.loads(body)
        return Beat(
            str(data["scheduler"]),
            bool(data["leading"]),
            datetime.fromisoformat(data["at"]),
            float(data["interval_seconds"]),
            _time(data.get("last_fire_at")),
            _time(data.get("next_fire_at")),
            float(data.get("lag_seconds") or 0.0),
            int(data.get("partition_count") or 1),
            tuple(int(p) for p in data.get("partitions") or ()),
            data.get("leaving") is True,
        )
    except (ValueError, KeyError, TypeError):
        return None


async def declare_beats(connection: AbstractConnection, names: Names) -> bool:
    """Declare ``<ns>_scheduler.beats``; False (logged) when it exists with other arguments."""
    args = stream_arguments(BEAT_MAX_BYTES, BEAT_MAX_AGE_SECONDS)
    return await declare_stream(connection, names.beat_stream, args)


def latest_by_scheduler(beats: list[Beat], into: dict[str, Beat] | None = None) -> dict[str, Beat]:
    """Each scheduler's latest beat, ``beats`` added to ``into``."""
    latest = {} if into is None else into
    for beat in beats:
        known = latest.get(beat.scheduler)
        if known is None or beat.at >= known.at:
            latest[beat.scheduler] = beat
    return latest


@dataclass(frozen=True, slots=True)
class SchedulerView:
    """What the leader queue and the beats say now."""

    held: bool
    beats: dict[str, Beat]
    now: datetime

    @property
    def leader(self) -> Beat | None:
        """The current beat of the scheduler that says it leads; None if none does."""
        leading = [b for b in self.beats.values() if b.leading and b.fresh(self.now)]
        return max(leading, key=lambda b: b.at, default=None) if self.held else None

    @property
    def standbys(self) -> list[Beat]:
        """Current beats of the schedulers standing by."""
        return sorted(
            (b for b in self.beats.values() if not b.leading and b.fresh(self.now)),
            key=lambda b: b.scheduler,
        )

    @property
    def leading(self) -> bool:
        """True while a scheduler holds the leader queue and beats."""
        return self.leader is not None

    @property
    def leaders(self) -> list[Beat]:
        """Current beats of every scheduler that leads (one, or one per share of partitions)."""
        if not self.held:
            return []
        return sorted(
            (b for b in self.beats.values() if b.leading and b.fresh(self.now)),
            key=lambda b: b.scheduler,
        )

    @property
    def unled(self) -> int:
        """Partitions that no current leader leads (all of them while none leads)."""
        leaders = self.leaders
        if not leaders:
            return 1
        count = leaders[0].partition_count
        return 0 if count == 1 else count - len({p for b in leaders for p in b.partitions})

    def line(self) -> str:
        """One sentence for the first line of ``warren status`` and the dashboard."""
        leaders = self.leaders
        if leaders and leaders[0].partition_count > 1:
            return partitions_line(leaders, len(self.standbys), self.now)
        leader, now = self.leader, self.now
        standbys = f"{len(self.standbys)} standby" if self.standbys else "no standby"
        if leader is not None:
            behind = f", {leader.lag_seconds:.0f}s behind" if leader.lag_seconds >= 1 else ""
            return (
                f"scheduler: {leader.scheduler} leads ({standbys}){behind}; last fire "
                f"{relative(leader.last_fire_at, now)}, next {relative(leader.next_fire_at, now)}"
            )
        if self.held:
            return (
                f"scheduler: SILENT: the leader queue is held but no leader beat ({standbys}); "
                "an older or stuck scheduler"
            )
        seen = max(self.beats.values(), key=lambda b: b.at, default=None)
        last = "never seen" if seen is None else f"last seen {relative(seen.at, now)}"
        return f"scheduler: DOWN: no scheduler leads ({standbys}; {last}); nothing fires"


def partitions_line(leaders: list[Beat], standbys: int, now: datetime) -> str:
    """Which scheduler leads which partitions, and whether every partition has a leader."""
    count = leaders[0].partition_count
    led = {p for b in leaders for p in b.partitions}
    shares = ", ".join(f"{b.scheduler} {_ranges(b.partitions)}" for b in leaders)
    state = "" if len(led) >= count else f"PARTIAL: {count - len(led)} partitions unled; "
    last = max((b.last_fire_at for b in leaders if b.last_fire_at), default=None)
    due = min((b.next_fire_at for b in leaders if b.next_fire_at), default=None)
    return (
        f"scheduler: {state}{len(leaders)} lead {len(led)} of {count} partitions ({shares}; "
        f"{standbys} standby); last fire {relative(last, now)}, next {relative(due, now)}"
    )


def _ranges(partitions: tuple[int, ...]) -> str:
    # 0-7,12 rather than 64 numbers in a line.
    spans: list[list[int]] = []
    for p in sorted(partitions):
        if spans and p == spans[-1][1] + 1:
            spans[-1][1] = p
        else:
            spans.append([p, p])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans) or "-"


async def recent_beats(connection: AbstractConnection, names: Names) -> list[Beat]:
    """The latest beats in the stream (an empty list when there is none)."""
    if not await declare_beats(connection, names):
        return []
    end = await stream_end(connection, names.beat_stream)
    if end is None:
        return []
    start = max(0, end.offset - RECENT_BEATS)
    beats = [
        decode_beat(body) async for _, body in read_messages(connection, names.beat_stream, start)
    ]
    return [beat for beat in beats if beat is not None]


async def scheduler_view(
    connection: AbstractConnection, names: Names, now: datetime, partitions: int = 1
) -> SchedulerView:
    """The leader queue (of ``partitions``) and the latest beats, read now."""
    held = await leader_held(connection, names, partitions)
    return SchedulerView(held, latest_by_scheduler(await recent_beats(connection, names)), now)


async def leader_held(connection: AbstractConnection, names: Names, partitions: int = 1) -> bool:
    """True while the leader queue (the first partition's lock) has an active consumer (or,
    from a scheduler older than the quorum lock, while its exclusive queue is held)."""
    queue = names.partition_leader_queue(0, partitions)
    return bool(await consumer_count(connection, queue))
