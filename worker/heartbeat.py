"""Heartbeats of an attempt: when its handler last said it is alive, with what progress; the
watchdog that fails an attempt whose handler stopped saying so; and the summary history keeps
(docs/long-jobs.md).

``ctx.heartbeat`` only stores a time and a value: a handler may call it in a tight loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import orjson

from warren_cron.clock import now_text
from warren_cron.history.events import SCHEMA

#: The largest progress value, as JSON: a heartbeat says how far, not what was done.
PROGRESS_MAX_BYTES = 4096
#: Intervals between two summaries while heartbeats come with the same progress: enough to
#: show the attempt alive, far fewer events than heartbeats.
QUIET_EVERY = 10
#: The summaries' interval for an attempt whose handler declared no heartbeat interval (an
#: http task's polls, a handler that beats now and then): often enough to follow a job.
UNDECLARED_SUMMARY_SECONDS = 5.0


class Beats:
    """The heartbeats of one attempt: the last one's time (``time.monotonic``) and progress."""

    __slots__ = ("count", "last", "progress", "written")

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.count = 0
        #: The last progress, as JSON already encoded (None before any).
        self.progress: bytes | None = None
        #: The progress the history's last ``progress`` event carried, when it was written,
        #: and the heartbeats counted then.
        self.written: tuple[bytes | None, float, int] = (None, self.last, 0)

    def beat(self, progress: Any = None) -> None:
        """Note a heartbeat now, with ``progress`` (small JSON) when given."""
        if progress is not None:
            self.progress = encoded_progress(progress)
        self.last = time.monotonic()
        self.count += 1

    def silent_for(self) -> float:
        """Seconds since the last heartbeat (or since the attempt began)."""
        return time.monotonic() - self.last

    def summary_due(self, every: float) -> bool:
        """True when history should get a ``progress`` event: the progress changed and
        ``every`` seconds passed since the last one written, or heartbeats came with the
        same progress and ``QUIET_EVERY`` times that passed."""
        progress, at, count = self.written
        elapsed = time.monotonic() - at
        if self.progress != progress:
            return elapsed >= every
        return self.count > count and elapsed >= every * QUIET_EVERY

    def mark_written(self) -> None:
        """The current progress went to history now."""
        self.written = (self.progress, time.monotonic(), self.count)


def encoded_progress(progress: Any) -> bytes:
    """``progress`` as JSON, or ValueError naming what is wrong with it."""
    try:
        encoded = orjson.dumps(progress)
    except TypeError as error:
        raise ValueError(
            f"ctx.heartbeat(progress): progress must be JSON ({error}); "
            'pass numbers, strings, lists or dicts, e.g. {"done": 120, "of": 900}'
        ) from None
    if len(encoded) > PROGRESS_MAX_BYTES:
        raise ValueError(
            f"ctx.heartbeat(progress): {len(encoded)} bytes of JSON, over {PROGRESS_MAX_BYTES}: "
            "report how far the work is, not the work"
        )
    return encoded


async def silence(beats: Beats, interval: float, misses: int) -> str:
    """Return, saying so, once ``beats`` has been silent for ``misses`` intervals."""
    allowed = interval * misses
    # Wakes when the silence could first reach the bound, not on a poll: a heartbeat sets a
    # number, and an event per heartbeat would cost every call.
    while (silent := beats.silent_for()) < allowed:  # noqa: ASYNC110
        await asyncio.sleep(allowed - silent)
    return f"no heartbeat for {beats.silent_for():.1f} s ({misses} intervals of {interval:g} s)"


def progress_fields(beats: Beats) -> dict[str, Any]:
    """The fields of a history ``progress`` event: the progress and the heartbeats so far."""
    progress = None if beats.progress is None else orjson.Fragment(beats.progress)
    return {"progress": progress, "heartbeats": beats.count}


Emit = Callable[[dict[str, Any]], None]


async def summarize(beats: Beats, every: float, emit: Emit, ids: dict[str, Any]) -> None:
    """Until cancelled, emit a history ``progress`` event (``ids`` name the run and attempt)
    whenever the progress changed and ``every`` seconds passed since the last one."""
    while True:
        await asyncio.sleep(every)
        if beats.summary_due(every):
            beats.mark_written()
            fields = {**ids, **progress_fields(beats)}
            # As ``history.events.event`` writes one: fields that are None are left out.
            kept = {key: value for key, value in fields.items() if value is not None}
            emit({"v": SCHEMA, "type": "progress", "at": now_text(), **kept})
