"""Which failed records a command works on: filters by name pattern, reason and time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from fnmatch import fnmatchcase

from warren_cron.durations import parse_ms
from warren_cron.headers import as_utc
from warren_cron.records import FailedRecord

_AGE_UNITS = ("s", "m", "h", "d")


def parse_since(value: str, now: datetime | None = None) -> datetime:
    """``--since``: an age (``90s``, ``30m``, ``2h``, ``7d``) or an ISO time (UTC if bare)."""
    age_ms = parse_ms(value.strip(), _AGE_UNITS, compound=False)
    if age_ms is not None:
        return (now or datetime.now(UTC)) - timedelta(milliseconds=age_ms)
    parsed = as_utc(value.strip())
    if parsed is None:
        raise ValueError(
            f"--since {value!r} is neither an age like 30m, 2h, 7d nor an ISO time "
            "like 2026-01-31T08:00:00Z"
        )
    return parsed


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """Which records a command works on; name patterns may use ``*`` and ``?``."""

    schedule: str | None = None
    task: str | None = None
    reason: str | None = None
    run_id: str | None = None
    since: datetime | None = None
    #: Text anywhere in the run id, schedule, task, reason or error, in any case.
    text: str | None = None
    #: Records that failed after this instant are left alone (they arrived during the run).
    until: datetime | None = None

    @property
    def selects_all(self) -> bool:
        """True when no filter narrows the selection."""
        return not any((self.schedule, self.task, self.reason, self.run_id, self.since, self.text))

    def matches(self, record: FailedRecord) -> bool:
        """True when ``record`` passes every filter that is set."""
        return (
            _like(self.schedule, record.schedule)
            and _like(self.task, record.task)
            and _like(self.run_id, record.run_id)
            and (self.reason is None or self.reason == record.reason)
            and _after(self.since, record.failed_at)
            and _before(self.until, record.failed_at)
            and _contains(self.text, record)
        )


def _like(pattern: str | None, value: str | None) -> bool:
    return pattern is None or (value is not None and fnmatchcase(value, pattern))


def _after(since: datetime | None, when: datetime | None) -> bool:
    return since is None or (when is not None and when >= since)


def _before(until: datetime | None, when: datetime | None) -> bool:
    return until is None or when is None or when <= until


def _contains(needle: str | None, record: FailedRecord) -> bool:
    if not needle:
        return True
    fields = (record.run_id, record.schedule, record.task, record.reason, record.error)
    lowered = needle.lower()
    return any(lowered in field.lower() for field in fields if field)


def exact(value: str) -> str:
    """A name pattern that matches ``value`` only: ``*``, ``?`` and ``[`` taken literally."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in value)
