"""Structured logging: JSON lines rendered by orjson, or a console renderer for people.

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
import time
from typing import Any, BinaryIO, Literal

import orjson
import structlog
from structlog.typing import EventDict, WrappedLogger


class IsoStamper:
    """Adds ``timestamp``, ISO 8601 in UTC with microseconds: 2026-11-22T03:23:42.698693Z."""

    __slots__ = ("_cached",)

    def __init__(self) -> None:
        # One tuple, so that a handler thread never pairs one second with another's text.
        self._cached = (-1, "")

    def __call__(self, _logger: WrappedLogger, _method: str, event_dict: EventDict) -> EventDict:
        """Stamp one event (structlog processor)."""
        now = time.time()
        second = int(now)
        cached, prefix = self._cached
        if second != cached:
            prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._cached = (second, prefix)
        event_dict["timestamp"] = f"{prefix}.{int((now - second) * 1e6):06d}Z"
        return event_dict


class LineWriter:
    """Writes rendered lines to a binary stream; flushes once per event-loop pass.

    Outside a running loop (start-up, shutdown, handler threads) every line is flushed at once.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._pending = False

    def msg(self, line: bytes) -> None:
        """Write one line (the method every log level maps to)."""
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

    debug = info = warning = warn = error = critical = exception = fatal = failure = msg


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


def _line_writer(stream: BinaryIO) -> Any:
    writer = LineWriter(stream)
    return lambda *_args: writer


def configure_logging(level: str = "INFO", fmt: Literal["json", "console"] = "json") -> None:
    """Configure structlog once per process; context bound with contextvars is merged first."""
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
    ]
    if fmt == "json":
        processors += [
            IsoStamper(),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=orjson.dumps),
        ]
        factory: Any = _line_writer(_stdout_buffer())
    else:
        processors += [
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(),
        ]
        factory = structlog.PrintLoggerFactory(sys.stdout)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    # aio-pika and aiormq log through the standard library: keep their warnings visible.
    logging.basicConfig(level=max(logging.getLevelName(level), logging.WARNING), stream=sys.stderr)
