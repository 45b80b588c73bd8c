"""How ``history.py`` shows runs to people: a table of runs, and one run's timeline."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from _cli import aligned, widths

from topology.durations import for_people
from topology.history.events import Event
from topology.history.runs import Run

COLUMNS = ("RUN ID", "SCHEDULE", "TASK", "ATTEMPTS", "OUTCOME", "TOOK", "LAST ERROR")
#: The last error keeps at least this many characters, however narrow the terminal.
MIN_ERROR = 24
#: Events after which the next attempt's wait is counted: an attempt's end, a fire, a replay.
_WAIT_FROM = frozenset({"attempt", "fired", "triggered", "replayed"})


def seconds_text(seconds: float | None) -> str:
    """A duration for people, to the millisecond; ``-`` when there is none."""
    return "-" if seconds is None else for_people(round(max(seconds, 0.0), 3), parts=2)


def one_line(text: str | None) -> str:
    """A text on one line, every run of spaces and line breaks made one space."""
    return " ".join((text or "-").split())


def cut(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, marked with ``…`` when cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def row(run: Run) -> tuple[str, ...]:
    """The cells of one run in the ``list`` table, its last error whole."""
    return (
        run.run_id,
        run.schedule or "-",
        run.task or "-",
        str(run.attempts),
        run.outcome,
        seconds_text(run.seconds),
        one_line(run.last_error),
    )


def runs_table(runs: Sequence[Run], width: int | None) -> str:
    """Runs as an aligned table whose last error is cut to fit ``width`` characters (when
    there is a width: a file or a pipe gets it whole)."""
    rows = [COLUMNS, *(row(run) for run in runs)]
    if width is None:
        return aligned(rows)
    before = sum(size + 2 for size in widths([cells[:-1] for cells in rows]))
    room = max(MIN_ERROR, width - before)
    return aligned([(*cells[:-1], cut(cells[-1], room)) for cells in rows])


def stamp(at: datetime) -> str:
    """A UTC time to the millisecond: ``2026-01-31 02:30:00.123Z``."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _attempt(event: Event, waited: float | None) -> str:
    parts = [str(event.get("reason"))] if event.get("reason") != event.get("outcome") else []
    if event.get("http_status") is not None:
        parts.append(f"HTTP {event.get('http_status')}")
    if event.get("duration_ms") is not None:
        parts.append(f"{event.get('duration_ms'):g} ms")
    if event.get("host"):
        parts.append(f"on {event.get('host')} pid {event.get('pid')}")
    wait = "" if waited is None else f" after waiting {seconds_text(waited)}"
    error = f": {one_line(event.get('error'))}" if event.get("error") else ""
    return f"{event.get('outcome')}{wait} ({', '.join(parts)}){error}"


def _by(event: Event) -> str:
    plan = f", plan {event.get('plan')}" if event.get("plan") else ""
    return f"by {event.get('by', '?')}{plan}"


def _failed(event: Event) -> str:
    error = f": {one_line(event.get('error'))}" if event.get("error") else ""
    return f"{event.get('reason')} after {event.get('attempts')} attempt(s){error}"


def _nothing(event: Event) -> str:
    return ""


_DETAILS: dict[str, Callable[[Event], str]] = {
    "fired": lambda e: f"for {e.get('scheduled_for')}, plan {e.get('plan')}",
    "triggered": _by,
    "skipped": lambda e: f"{e.get('scheduled_for')}: {e.get('reason')}",
    "failed": _failed,
    "replayed": lambda e: f"{_by(e)} (replay {e.get('replay', '?')})",
    "purged": _by,
}


def _line(event: Event, waited: float | None) -> str:
    if event.type == "attempt":
        label, detail = f"attempt {event.get('attempt')}", _attempt(event, waited)
    else:
        label, detail = event.type, _DETAILS.get(event.type, _nothing)(event)
    return f"{stamp(event.at)}  {label:<10}  {detail}".rstrip()


def timeline(run: Run) -> list[str]:
    """One line per event, in time order; an attempt says how long it waited to start (from
    the end of the attempt before, or from the fire or replay)."""
    lines, since = [], None
    for event in run.in_time_order():
        waited = None
        if event.type == "attempt" and since is not None:
            started = event.at.timestamp() - float(event.get("duration_ms") or 0) / 1000
            waited = started - since.timestamp()
        lines.append(_line(event, waited))
        since = event.at if event.type in _WAIT_FROM else since
    return lines


def story(run: Run) -> str:
    """One run for people: what became of it, then its timeline."""
    took = "" if run.seconds is None else f", {seconds_text(run.seconds)} from fire to end"
    fields = [
        ("run id", run.run_id),
        ("schedule", run.schedule or "-"),
        ("task", run.task or "-"),
        ("outcome", f"{run.outcome} after {run.attempts} attempt(s){took}"),
        ("replays", str(run.replays) + (", record purged" if run.purged else "")),
        ("last error", one_line(run.last_error)),
    ]
    return "\n".join([f"{name:<10}: {value}" for name, value in fields] + ["", *timeline(run)])
