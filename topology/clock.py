"""Time helpers: now, and the UTC spellings of a moment in run ids, logs, history and the
task message.

Formatting a datetime costs a few microseconds, which a worker would pay on every log line
and history event: ``now_text`` formats the date and time once per second.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from functools import lru_cache


class IsoClock:
    """``2026-11-22T03:23:42.698693Z`` for now; safe to call from several threads."""

    __slots__ = ("_cached",)

    def __init__(self) -> None:
        # One tuple, so that a thread never pairs one second with another's text.
        self._cached = (-1, "")

    def text(self) -> str:
        """Now, with microseconds."""
        now = time.time()
        second = int(now)
        cached, prefix = self._cached
        if second != cached:
            prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._cached = (second, prefix)
        return f"{prefix}.{int((now - second) * 1e6):06d}Z"


#: The process's clock.
now_text = IsoClock().text


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC."""
    return datetime.now(UTC)


# Cached: a burst of fires shares one fire time, and each fire spells it several times.
@lru_cache(maxsize=256)
def utc_text(moment: datetime) -> str:
    """``2024-03-10T07:00:00Z``: the UTC spelling used in run ids and logs."""
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f").rstrip("0").rstrip(".")
    return f"{text}Z"


@lru_cache(maxsize=256)
def json_time(moment: datetime) -> str:
    """``2024-03-10T07:00:00Z`` or ``…:00.250000Z``: how the envelope's JSON spells a time."""
    return f"{moment.astimezone(UTC).replace(tzinfo=None).isoformat()}Z"
