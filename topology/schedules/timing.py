"""When a schedule fires: cron expressions in a time zone, and anchored intervals.

A cron expression is matched against the wall clock of its time zone, the way cron does it
across daylight-saving changes:

- an expression whose minute or hour field starts with ``*`` (``*/15 * * * *``,
  ``30 * * * *``) runs by the clock as it happens: every 15 minutes stays every 15 minutes of
  real time through both changes, and wall times that do not exist are not run;
- any other expression names fixed times of day: a time skipped when clocks spring forward
  fires once, at the moment of the jump; a time that happens twice when clocks fall back
  fires once, the first time.

An interval (``every = "5m"``) is anchored: fire n is at ``anchor + n * interval`` whenever
earlier fires were published, so a schedule never drifts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from warren_cron.clock import utc_text
from warren_cron.durations import for_people, parse_ms
from warren_cron.errors import TimingError

#: Anchor of intervals without ``start_at``: every scheduler computes the same fire times.
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Time-zone changes are months apart, so two never fall inside one scan step.
_SCAN_STEP = timedelta(hours=12)
_TICK = timedelta(microseconds=1)
_MAX_HOPS = 1000
_INTERVAL_UNITS = ("d", "h", "m", "s")
MAX_INTERVAL = timedelta(days=366)


class Timing(Protocol):
    """Fire times of one schedule, without start or stop bounds."""

    def next_after(self, moment: datetime) -> datetime | None:
        """The first fire strictly after ``moment`` (UTC), or None if there is none."""

    def describe(self) -> str:
        """How the schedule fires, for people."""


def load_zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name``, or a ``TimingError`` saying how to spell one."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise TimingError(
            f"unknown time zone {name!r}; use an IANA name such as 'UTC', "
            "'Europe/Berlin' or 'America/New_York'"
        ) from None


@lru_cache(maxsize=1024)  # validated, then resolved: each spelling is read once
def parse_interval(text: str) -> timedelta:
    """Read ``30s``, ``5m``, ``1h30m`` or ``1d`` into a positive interval."""
    ms = parse_ms(text, _INTERVAL_UNITS)
    if ms is None:
        raise TimingError(f"{text!r} is not an interval like 30s, 5m, 1h30m or 1d")
    seconds = ms // 1000
    if not 0 < seconds <= MAX_INTERVAL.total_seconds():
        raise TimingError(f"interval {text!r} must be between 1s and {MAX_INTERVAL.days}d")
    return timedelta(seconds=seconds)


def format_duration(seconds: float) -> str:
    """Spell a duration for people: ``3.5s``, ``1m30s``, ``2h``, ``1d2h``."""
    return for_people(seconds)


@dataclass(frozen=True, slots=True)
class IntervalTiming:
    """Fires at ``anchor + n * every`` for every whole n >= 0."""

    every: timedelta
    anchor: datetime = EPOCH

    def next_after(self, moment: datetime) -> datetime | None:
        """The first anchored fire strictly after ``moment``."""
        if moment < self.anchor:
            return self.anchor
        steps = (moment - self.anchor) // self.every + 1
        return self.anchor + steps * self.every

    def describe(self) -> str:
        """E.g. ``every 5m from 1970-01-01T00:00:00Z``."""
        return f"every {format_duration(self.every.total_seconds())} from {utc_text(self.anchor)}"


class CronTiming:
    """A five-field cron expression in a time zone; parsed once, reused for every fire."""

    def __init__(self, expression: str, zone: str = "UTC") -> None:
        fields = expression.split()
        if len(fields) != 5:
            raise TimingError(
                f"{expression!r} has {len(fields)} fields; give 5: "
                "minute hour day-of-month month day-of-week"
            )
        try:
            self._iter = croniter(expression, datetime(2000, 1, 1), ret_type=datetime)
        except CroniterError as error:
            raise TimingError(f"{expression!r} is not a valid cron expression: {error}") from None
        self.expression = expression
        self.zone = load_zone(zone)
        self.by_the_clock = fields[0].startswith("*") or fields[1].startswith("*")
        #: The last question and its answer: schedules sharing this timing ask in turn.
        self._last: tuple[datetime, datetime | None] | None = None

    def describe(self) -> str:
        """E.g. ``cron '30 2 * * *' in Europe/Berlin``."""
        return f"cron {self.expression!r} in {self.zone.key}"

    def next_after(self, moment: datetime) -> datetime | None:
        """The first fire strictly after ``moment``, with the DST rules of the module doc."""
        last = self._last
        # The answer holds for every moment from the last question's up to it (no fire lies
        # between them): schedules sharing the timing but owed from different moments, as a
        # partition taken over asks for each, are answered without croniter.
        if last is not None and last[0] <= moment and (last[1] is None or moment < last[1]):
            return last[1]
        answer = self._next_after(moment)
        self._last = (moment, answer)
        return answer

    def _next_after(self, moment: datetime) -> datetime | None:
        cur = moment.astimezone(UTC)
        offset = self._offset(cur)
        for _ in range(_MAX_HOPS):
            wall = self._next_wall(_wall(cur, offset))
            if wall is None:
                return None
            instant = _instant(wall, offset)
            change = self._first_change(cur, instant, offset)
            if change is None:
                if self.by_the_clock or instant.astimezone(self.zone).fold == 0:
                    return instant
                cur = instant  # the second pass of a repeated hour: fixed times ran already
                continue
            new = self._offset(change)
            if not self.by_the_clock and new > offset and self._fires_in_gap(change, offset, new):
                return change
            cur, offset = change - _TICK, new
        raise TimingError(f"{self.expression!r}: no fire found after {moment}")

    def _offset(self, instant: datetime) -> timedelta:
        offset = instant.astimezone(self.zone).utcoffset()
        assert offset is not None  # a ZoneInfo always knows its offset
        return offset

    def _next_wall(self, wall: datetime) -> datetime | None:
        self._iter.set_current(wall, force=True)
        try:
            return self._iter.get_next(datetime)
        except CroniterError:
            return None  # e.g. "0 0 30 2 *": no such day

    def _fires_in_gap(self, change: datetime, old: timedelta, new: timedelta) -> bool:
        # Wall times from the change in the old offset up to the change in the new one
        # never happen; a fixed-time expression due among them fires at the change.
        wall = self._next_wall(_wall(change, old) - _TICK)
        return wall is not None and wall < _wall(change, new)

    def _first_change(self, start: datetime, end: datetime, offset: timedelta) -> datetime | None:
        lo = start
        while lo < end:
            hi = min(lo + _SCAN_STEP, end)
            if self._offset(hi) != offset:
                return self._bisect(lo, hi, offset)
            lo = hi
        return None

    def _bisect(self, lo: datetime, hi: datetime, offset: timedelta) -> datetime:
        # Invariant: no change in (start, lo]; the offset at hi differs.
        while hi - lo > _TICK:
            mid = lo + (hi - lo) / 2
            if self._offset(mid) == offset:
                lo = mid
            else:
                hi = mid
        return hi


# croniter takes about 200 µs to parse an expression and 150 µs per next time; schedules
# that share an expression and zone (a file of thousands repeats a few dozen) share both.
@lru_cache(maxsize=4096)
def cron_timing(expression: str, zone: str = "UTC") -> CronTiming:
    """The timing of a cron expression in a zone, shared by every schedule that uses it."""
    return CronTiming(expression, zone)


def _wall(instant: datetime, offset: timedelta) -> datetime:
    return (instant + offset).replace(tzinfo=None)


def _instant(wall: datetime, offset: timedelta) -> datetime:
    return (wall - offset).replace(tzinfo=UTC)
