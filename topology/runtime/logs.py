"""Structured logging: JSON lines rendered by orjson, or a console renderer for people.

Every line has ``timestamp``, ``level``, ``event`` and ``logger``, also those of the standard
library's ``logging`` (aio-pika, aiormq, asyncio, handler modules), which structlog renders
with the same processors through its ``ProcessorFormatter``. structlog's own lines never pass
through ``logging``.

The worker writes a line per attempt, thousands a second at full speed, so the JSON path is
kept lean: the timestamp's date and time are formatted once per second, and lines written
from the event loop are buffered and written once per pass of the loop rather than once each
(also with ``PYTHONUNBUFFERED=1``, which would otherwise make every line a system call).
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import io
import logging
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any, BinaryIO, Literal, NamedTuple

import orjson
import structlog
from structlog.processors import JSONRenderer, format_exc_info
from structlog.stdlib import ProcessorFormatter, add_logger_name
from structlog.typing import EventDict, Processor, WrappedLogger

from warren_cron.clock import IsoClock
from warren_cron.runtime.chatter import demote_reconnect_chatter
from warren_cron.runtime.settings import redact_urls
from warren_cron.tracing import add_trace_id

#: The methods structlog calls on the object it writes to, one per level.
_METHODS: tuple[str, ...] = ("msg", "debug", "info", "warning", "warn", "error", "critical")
_METHODS += ("exception", "fatal", "failure")


class IsoStamper:
    """Adds ``timestamp``, ISO 8601 in UTC with microseconds: 2026-11-22T03:23:42.698693Z."""

    __slots__ = ("_clock",)

    def __init__(self) -> None:
        self._clock = IsoClock()

    def __call__(self, _logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
        """Stamp one event (structlog processor), unless it brings its time: an attempt's line
        carries the time its attempt ended, as its history event does, read once for both."""
        if "timestamp" not in event_dict:
            event_dict["timestamp"] = self._clock.text()
        return event_dict


def format_exc_info_if_any(logger: WrappedLogger, method: str, event_dict: EventDict) -> EventDict:
    """structlog's ``format_exc_info`` for a line that carries an exception (structlog
    processor): most lines carry none, and the look costs the worker each attempt's line."""
    if "exc_info" in event_dict:
        return format_exc_info(logger, method, event_dict)
    return event_dict


class LineWriter:
    """Writes rendered lines to a binary stream; flushes once per event-loop pass.

    Outside a running loop (start-up, shutdown, handler threads) every line is flushed at once.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._pending = False

    def write(self, line: bytes) -> None:
        """Write one line."""
        self._stream.write(line + b"\n")
        if self._pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._stream.flush()
            return
        self._pending = True
        loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._pending = False
        self._stream.flush()


def _stdout_buffer() -> BinaryIO:
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, io.UnsupportedOperation):
        return sys.stdout.buffer  # replaced by a test harness: write where it points
    return _buffered(fd)


@functools.cache
def _buffered(fd: int) -> BinaryIO:
    # A buffer of our own on the descriptor, which stays open when this object goes.
    stream = open(fd, "wb", closefd=False)  # noqa: SIM115 - lives as long as the process
    atexit.register(stream.flush)
    return stream


class Output:
    """What a structlog logger writes to: its name (the ``logger`` field) and a line writer."""

    def __init__(self, name: str | None, write: Callable[[Any], None]) -> None:
        self.name = name
        for method in _METHODS:
            setattr(self, method, write)


class StdlibLines(logging.Handler):
    """Writes the standard library's records as lines, rendered by a ``ProcessorFormatter``."""

    def __init__(self, write: Callable[[str], None], formatter: logging.Formatter) -> None:
        super().__init__()
        self._write = write
        self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        """Render and write one record."""
        try:
            self._write(self.format(record))
        except Exception:
            self.handleError(record)


#: The level of each method a ``DictLines`` writes at.
_LEVEL_NUMBERS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


class DictLines:
    """Writes lines whose fields the caller holds in a dict, through a bound logger's own
    level filter and processors: the same line as ``logger.info(event, **fields)``.

    structlog's keyword path packs and unpacks each field three times on its way to the
    processors (about 2,000 instructions a field; the worker writes a line of nine each
    attempt). ``_process_event`` is the step structlog's custom wrappers call (it documents
    it for them), and takes the dict as it is.
    """

    __slots__ = ("_logger",)

    def __init__(self, logger: Any) -> None:
        self._logger = logger

    def write(self, method: str, event: str, fields: dict[str, Any]) -> None:
        """One line of ``fields`` at ``method``'s level (``info``, ``warning``, ...)."""
        if not self._logger.is_enabled_for(_LEVEL_NUMBERS[method]):
            return
        try:
            args, kw = self._logger._process_event(method, event, fields)
        except structlog.DropEvent:
            return
        getattr(self._logger._logger, method)(*args, **kw)


class LogFormat(NamedTuple):
    """How a ``CRON_LOG_FORMAT`` stamps, renders and writes lines."""

    stamp: list[Processor]
    render: Processor
    render_text: Processor  # the standard library's handler wants text
    write: Callable[[Any], None]
    write_text: Callable[[str], None]


def _json_format() -> LogFormat:
    writer = LineWriter(_stdout_buffer())
    return LogFormat(
        stamp=[IsoStamper(), format_exc_info_if_any],
        render=JSONRenderer(serializer=orjson.dumps),
        render_text=JSONRenderer(serializer=lambda *a, **kw: orjson.dumps(*a, **kw).decode()),
        write=writer.write,
        write_text=lambda text: writer.write(text.encode()),
    )


def _console_format() -> LogFormat:
    printer = structlog.PrintLogger(sys.stdout)
    renderer = structlog.dev.ConsoleRenderer()
    stamp: list[Processor] = [structlog.processors.TimeStamper(fmt="iso", utc=True)]
    return LogFormat(stamp, renderer, renderer, printer.msg, printer.msg)


def _hide_passwords(_logger: WrappedLogger, _method: str, line: Any) -> str:
    # A library may put a URL with its password into a message or an exception.
    return redact_urls(line)


def configure_logging(level: str = "INFO", fmt: Literal["json", "console"] = "json") -> None:
    """Configure structlog once per process, and route the standard library's logging to it."""
    form = _json_format() if fmt == "json" else _console_format()
    threshold = logging.getLevelName(level)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        # The current span's ids (docs/tracing.md); a global's check with tracing off.
        add_trace_id,
        structlog.processors.add_log_level,
        add_logger_name,
        *form.stamp,
    ]
    structlog.configure(
        processors=[*shared, form.render],
        wrapper_class=structlog.make_filtering_bound_logger(threshold),
        logger_factory=lambda name=None, *_: Output(name, form.write),
        cache_logger_on_first_use=True,
    )
    formatter = ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[ProcessorFormatter.remove_processors_meta, form.render_text, _hide_passwords],
    )
    _route_stdlib(StdlibLines(form.write_text, formatter), threshold)


def _route_stdlib(handler: logging.Handler, threshold: int) -> None:
    # Also Python's warnings and a crash's traceback: no plain line reaches stdout or stderr.
    root = logging.getLogger()
    for previous in [h for h in root.handlers if isinstance(h, StdlibLines)]:
        root.removeHandler(previous)
    handler.setLevel(threshold)
    root.addHandler(handler)
    # Libraries' INFO and DEBUG lines are chatter (aiormq logs every frame) or worse: httpx
    # logs each request's URL at INFO, with a chat webhook's token in it. Their warnings stay;
    # those a broker outage repeats are made DEBUG lines, shown at CRON_LOG_LEVEL=DEBUG.
    root.setLevel(max(threshold, logging.WARNING))
    demote_reconnect_chatter()
    logging.captureWarnings(True)
    sys.excepthook = _log_uncaught


def _log_uncaught(
    kind: type[BaseException], error: BaseException, traceback: TracebackType | None
) -> None:
    structlog.get_logger("warren").critical("uncaught exception", exc_info=(kind, error, traceback))
