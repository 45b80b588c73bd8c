"""How ``warren history`` shows runs to people: a table of runs, and one run's timeline."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from warren_cron.cli.common import aligned, widths
from warren_cron.history.run_fold import Run
from warren_cron.history.timeline import one_line, seconds_text, steps

COLUMNS = ("RUN ID", "SCHEDULE", "TASK", "ATTEMPTS", "OUTCOME", "TOOK", "LAST ERROR")
#: The last error keeps at least this many characters, however narrow the terminal.
MIN_ERROR = 24


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


def timeline(run: Run) -> list[str]:
    """One line per event, in the order they happened (see ``topology.history.timeline``)."""
    lines = []
    for step in steps(run):
        error = f": {step.error}" if step.error else ""
        lines.append(f"{stamp(step.event.at)}  {step.label:<10}  {step.detail}{error}".rstrip())
    return lines


def story(run: Run) -> str:
    """One run for people: what became of it, then its timeline."""
    took = "" if run.seconds is None else f", {seconds_text(run.seconds)} from fire to end"
    took = ", before it began" if run.never_began else took
    fields = [
        ("run id", run.run_id),
        ("schedule", run.schedule or "-"),
        ("task", run.task or "-"),
        ("outcome", f"{run.outcome} after {run.attempts} attempt(s){took}"),
        ("replays", str(run.replays) + (", record purged" if run.purged else "")),
        ("last error", one_line(run.last_error)),
    ]
    return "\n".join([f"{name:<10}: {value}" for name, value in fields] + ["", *timeline(run)])
