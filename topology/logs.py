"""Structured logging: JSON lines rendered by orjson, or a console renderer for people."""

from __future__ import annotations

import logging
import sys
from typing import Literal

import orjson
import structlog


def configure_logging(level: str = "INFO", fmt: Literal["json", "console"] = "json") -> None:
    """Configure structlog once per process; context bound per message is merged first."""
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
    ]
    if fmt == "json":
        processors.append(structlog.processors.JSONRenderer(serializer=orjson.dumps))
        factory: structlog.typing.WrappedLogger = structlog.BytesLoggerFactory(sys.stdout.buffer)
    else:
        processors.append(structlog.dev.ConsoleRenderer())
        factory = structlog.PrintLoggerFactory(sys.stdout)
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level)),
        logger_factory=factory,
        cache_logger_on_first_use=True,
    )
    # aio-pika and aiormq log through the standard library: keep their warnings visible.
    logging.basicConfig(level=max(logging.getLevelName(level), logging.WARNING), stream=sys.stderr)
