"""What the ops scripts share: exit codes, usage errors, retry-plan options, log lines on stderr,
aligned tables and a progress bar."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Coroutine, Sequence
from typing import Any, TextIO

import structlog
from pydantic import ValidationError

from warren_cron.cli.usage import EXIT_BROKER as EXIT_BROKER
from warren_cron.cli.usage import EXIT_OK as EXIT_OK
from warren_cron.cli.usage import EXIT_PARTIAL as EXIT_PARTIAL
from warren_cron.cli.usage import EXIT_USAGE as EXIT_USAGE
from warren_cron.cli.usage import UsageError as UsageError
from warren_cron.cli.usage import add_plan_options as add_plan_options
from warren_cron.errors import (
    BROKER_TROUBLE,
    BrokerUnavailable,
    Loc,
    TopologyError,
    validation_problems,
)
from warren_cron.plan import RetryPlan
from warren_cron.runtime.chatter import demote_reconnect_chatter
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.spec import RetrySpec

#: Runs over this many messages show progress (a bar on a terminal, a line per tenth otherwise).
PROGRESS_FROM = 300
_PLAN_OPTIONS = ("max_retries", "delay_ms", "multiplier")


def _option(loc: Loc) -> str:
    return "--" + str(loc[0]).replace("_", "-") if loc else ""


def plan_options(args: argparse.Namespace, settings: CronSettings) -> RetryPlan | None:
    """The plan those options give, over the CRON_* defaults; None when none is given."""
    given = {name: getattr(args, name) for name in _PLAN_OPTIONS}
    if all(value is None for value in given.values()):
        return None
    try:
        spec = RetrySpec(**{name: value for name, value in given.items() if value is not None})
    except ValidationError as error:
        raise UsageError("; ".join(validation_problems(error, where=_option))) from None
    return spec.plan(settings)


def run_command(prog: str, command: Coroutine[Any, Any, int]) -> int:
    """Run an async command for its exit code; broker trouble is said on stderr and exits 3."""
    try:
        return asyncio.run(command)
    except BrokenPipeError:
        raise  # an OSError, but the reader's doing: ``quiet_on_closed_pipe`` ends the command
    except (BrokerUnavailable, TopologyError) as error:
        print(f"{prog}: {error}", file=sys.stderr)
    except BROKER_TROUBLE as error:
        print(f"{prog}: the broker failed: {type(error).__name__}: {error}", file=sys.stderr)
    return EXIT_BROKER


def log_to_stderr(level: str = "INFO") -> None:
    """Send the library's log lines to stderr, so stdout stays the command's output; a lost
    broker is one line, not aio-pika's and aiormq's tracebacks and a line per retry."""
    demote_reconnect_chatter()
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


def widths(rows: Sequence[Sequence[str]]) -> list[int]:
    """The width of each column: its longest cell."""
    return [max(len(cells[i]) for cells in rows) for i in range(len(rows[0]))]


def aligned(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells as a text table, columns aligned; the first row is the header."""
    sizes = widths(rows)
    return "\n".join(aligned_row(cells, sizes) for cells in rows)


def aligned_row(cells: Sequence[str], sizes: Sequence[int]) -> str:
    """One row of a text table, each cell padded to its column's width."""
    return "  ".join(c.ljust(w) for c, w in zip(cells, sizes, strict=True)).rstrip()


class ProgressBar:
    """A progress bar on stderr for large runs; silent for small ones."""

    WIDTH = 30

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool = True) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = self.stream.isatty()
        self._drawn_at = 0.0
        self._tenth = -1
        self._open = False

    def __call__(self, done: int, total: int) -> None:
        """Show that ``done`` of ``total`` messages were handled."""
        if not self.enabled or total < PROGRESS_FROM:
            return
        if self.tty:
            self._draw(done, total)
        elif done * 10 // total > self._tenth:
            self._tenth = done * 10 // total
            print(f"{self.label}: {done}/{total}", file=self.stream, flush=True)

    def _draw(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self._drawn_at < 0.1:
            return
        self._drawn_at = now
        filled = self.WIDTH * done // total
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total}")
        self.stream.flush()
        self._open = True

    def close(self) -> None:
        """End the bar's line so the summary starts on a line of its own."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False
