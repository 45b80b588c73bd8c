"""A broker outage in the log: one warning when a connection is lost, one info when it is back.

While the broker is away, aio-pika's robust connection tries again every second, and each try
makes aio-pika and aiormq log a warning and an error; the loss itself makes them log an
error, a warning with a traceback, and an error per robust channel. ``watch_outages`` says it
once per connection instead, and ``demote_reconnect_chatter`` turns those library lines into
DEBUG lines, still there at ``CRON_LOG_LEVEL=DEBUG``.

The library lines are matched by logger and message template, which ``tests/test_logs.py``
finds in the installed libraries' sources, so an upgrade that changes them fails a test.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping

import structlog
from aio_pika import RobustChannel
from aio_pika.abc import AbstractConnection, AbstractRobustConnection

log = structlog.get_logger("broker")

Applies = Callable[[logging.LogRecord], bool]


def always(_record: logging.LogRecord) -> bool:
    """Every record of the template is chatter."""
    return True


def reopening_a_channel(record: logging.LogRecord) -> bool:
    """A robust channel's reopen on the lost connection failed: the reconnect reopens it."""
    args = record.args if isinstance(record.args, tuple) else ()
    callback = getattr(args[0], "callback", None) if args else None
    return getattr(callback, "__func__", None) is RobustChannel._on_close


#: Logger → message template → whether a record of it is about a lost connection or a retry.
CHATTER: Mapping[str, Mapping[str, Applies]] = {
    "aio_pika.robust_connection": {
        'Connection attempt to "%s" failed: %s. Reconnecting after %r seconds.': always,
        'Connection attempt to "%s" cancelled. Reconnecting after %r seconds.': always,
    },
    "aiormq.connection": {
        "error when creating transport: %r": always,
        'Unexpected connection close from remote "%s", '
        "Connection.Close(reply_code=%r, reply_text=%r)": always,
        "Cancelling cause reader exited abnormally": always,
        "Server connection %r was stuck. No frames were received in %d seconds.": always,
    },
    "aio_pika.tools": {"Callback %r error: %s: %s": reopening_a_channel},
}


class Demote(logging.Filter):
    """Makes the records one logger writes about a lost connection DEBUG records."""

    def __init__(self, templates: Mapping[str, Applies]) -> None:
        super().__init__()
        self.templates = templates

    def filter(self, record: logging.LogRecord) -> bool:
        """Demote chatter; let every record through."""
        applies = self.templates.get(record.msg) if isinstance(record.msg, str) else None
        if applies is not None and applies(record):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


def demote_reconnect_chatter() -> None:
    """Install the ``Demote`` filters on aio-pika's and aiormq's loggers (once)."""
    for name, templates in CHATTER.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, Demote) for f in logger.filters):
            logger.addFilter(Demote(templates))


class OutageLog:
    """Logs once that connection ``name`` was lost, and once that it is back."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lost_at: float | None = None

    def lost(self, connection: AbstractConnection | None, error: BaseException | None) -> None:
        """Close callback: also called after each failed try, and for a close asked for."""
        if self._lost_at is not None or connection is None or connection.close_called:
            return
        self._lost_at = time.monotonic()
        log.warning("broker connection lost; reconnecting", connection=self.name, error=why(error))

    def back(self, _connection: AbstractRobustConnection | None) -> None:
        """Reconnect callback: the connection and its channels are restored."""
        if self._lost_at is None:
            return
        down = round(time.monotonic() - self._lost_at, 1)
        self._lost_at = None
        log.info("broker connection back", connection=self.name, down_s=down)


def why(error: BaseException | None) -> str:
    """What the log says a connection was lost to."""
    if isinstance(error, asyncio.CancelledError):
        # aiormq cancels its reader when no frame came within the heartbeat timeout.
        return "no frame from the broker within the heartbeat timeout"
    return repr(error)


def watch_outages(connection: AbstractRobustConnection, name: str) -> None:
    """Log each outage of ``connection`` once: a warning when lost, an info when back."""
    outage = OutageLog(name)
    connection.close_callbacks.add(outage.lost)
    connection.reconnect_callbacks.add(outage.back)
