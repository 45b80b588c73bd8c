"""One run's story as steps: each event in the order it happened (``Run.told``), what
it says, and the wait before it.

``warren history show`` prints these steps as lines and the dashboard's run page as a timeline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from warren_cron.durations import for_people
from warren_cron.history.events import Event
from warren_cron.history.run_fold import Run

#: Events after which the next attempt's wait is counted: an attempt's end, a fire, a replay.
_WAIT_FROM = frozenset({"attempt", "fired", "triggered", "replayed"})


def seconds_text(seconds: float | None) -> str:
    """A duration for people, to the millisecond; ``-`` when there is none."""
    return "-" if seconds is None else for_people(round(max(seconds, 0.0), 3), parts=2)


def one_line(text: str | None) -> str:
    """A text on one line, every run of spaces and line breaks made one space."""
    return " ".join((text or "-").split())


@dataclass(frozen=True, slots=True)
class Step:
    """One event of a run: its label (``fired``, ``attempt 2``), what it says, its error, and
    for an attempt the seconds it waited to start."""

    event: Event
    label: str
    detail: str
    error: str | None
    waited: float | None


def _attempt(event: Event, waited: float | None) -> str:
    parts = [str(event.get("reason"))] if event.get("reason") != event.get("outcome") else []
    if event.get("http_status") is not None:
        parts.append(f"HTTP {event.get('http_status')}")
    if event.get("duration_ms") is not None:
        parts.append(f"{event.get('duration_ms'):g} ms")
    if event.get("host"):
        parts.append(f"on {event.get('host')} pid {event.get('pid')}")
    wait = "" if waited is None else f" after waiting {seconds_text(waited)}"
    return f"{event.get('outcome')}{wait} ({', '.join(parts)})"


def _by(event: Event) -> str:
    plan = f", plan {event.get('plan')}" if event.get("plan") else ""
    why = f", because: {one_line(event.get('reason'))}" if event.get("reason") else ""
    return f"by {event.get('by', '?')}{plan}{why}"


def _failed(event: Event) -> str:
    return f"{event.get('reason')} after {event.get('attempts')} attempt(s)"


def _skipped(event: Event) -> str:
    text = f"{event.get('scheduled_for')}: {event.get('reason')}"
    if event.get("count") is None:
        return text
    return f"{text}, {event.get('count')} fire(s) through {event.get('last')}"


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _nothing(event: Event) -> str:
    return ""


_DETAILS: dict[str, Callable[[Event], str]] = {
    "fired": lambda e: f"for {e.get('scheduled_for')}, plan {e.get('plan')}",
    "triggered": _by,
    "skipped": _skipped,
    "failed": _failed,
    "replayed": lambda e: f"{_by(e)} (replay {e.get('replay', '?')})",
    "purged": _by,
    "cancelled": _by,
    "progress": lambda e: f"{_json(e.get('progress'))} ({e.get('heartbeats')} heartbeats)",
}


def _step(event: Event, waited: float | None) -> Step:
    error = one_line(event.get("error")) if event.get("error") else None
    if event.type == "attempt":
        return Step(
            event, f"attempt {event.get('attempt')}", _attempt(event, waited), error, waited
        )
    detail = _DETAILS.get(event.type, _nothing)(event)
    return Step(event, event.type, detail, error, None)


def steps(run: Run) -> list[Step]:
    """One step per event, in the order they happened; an attempt says how long it waited
    to start (from the end of the attempt before, or from the fire or replay)."""
    found, since = [], None
    for event in _latest_progress(run.told()):
        waited = None
        if event.type == "attempt" and since is not None:
            started = event.at.timestamp() - float(event.get("duration_ms") or 0) / 1000
            waited = started - since.timestamp()
        found.append(_step(event, waited))
        since = event.at if event.type in _WAIT_FROM else since
    return found


def _latest_progress(events: list[Event]) -> list[Event]:
    """The events but the progress of an attempt that a later progress of it tells anew:
    a long attempt's hours would otherwise be hundreds of steps."""
    last = {(e.get("replay"), e.get("attempt")): e for e in events if e.type == "progress"}
    return [
        e for e in events if e.type != "progress" or last[e.get("replay"), e.get("attempt")] is e
    ]
