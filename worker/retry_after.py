"""``Retry-After``: how long an endpoint asked to wait, and how long a retry then waits.

The header holds whole seconds (``120``) or an HTTP date; anything else (a negative number,
a fraction, garbage) is ignored, and the task's retry plan applies as if no header came.
The wait is honoured up to ``CRON_RETRY_MAX_DELAY_MS`` (an hour when unset), or the plan's
longest remaining step where that is longer (a schedule's own plan may set a longer cap), so
an endpoint cannot park a task for years; a wait that would start the next attempt past the
task's deadline ends it ``expired``.
"""

from __future__ import annotations

import math
from datetime import datetime
from email.utils import parsedate_to_datetime

from warren_cron.headers import as_utc
from warren_cron.plan import RetryPlan

#: Longest header value read: enough for an HTTP date, short enough to refuse junk at once.
MAX_HEADER_CHARS = 64
#: The longest wait honoured when ``CRON_RETRY_MAX_DELAY_MS`` is unset: an hour.
UNSET_CAP_MS = 3_600_000


def retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from ``now`` that a ``Retry-After`` value asks for, else None."""
    if value is None or len(value) > MAX_HEADER_CHARS:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    return _date_wait(value, now)


def _date_wait(value: str, now: datetime) -> float | None:
    try:
        when = as_utc(parsedate_to_datetime(value))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return None if when is None else max(0.0, (when - now).total_seconds())


def retry_after_hold(asked: float, routing_key: str, max_delay_ms: int | None = None) -> int:
    """Whole seconds the next attempt waits when the endpoint asked ``asked``: rounded up, at
    most ``max_delay_ms`` (an hour when None) or the longest step left in the plan
    ``routing_key`` names, whichever is longer."""
    # Not the next step's size: a 429 asking 3 s on a plan of 200 ms steps was retried too soon.
    longest_ms = max(RetryPlan.from_key(routing_key).delays_ms, default=0)
    cap_ms = max(longest_ms, UNSET_CAP_MS if max_delay_ms is None else max_delay_ms)
    return min(math.ceil(asked), math.ceil(cap_ms / 1000))
