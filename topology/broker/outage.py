"""A broker outage in the log: one warning when a connection is lost, one info when it is back.

While the broker is away, aio-pika's robust connection tries again every second, and each try
makes aio-pika and aiormq log a warning and an error; the loss itself makes them log an
error, a warning with a traceback, and an error per robust channel. ``watch_outages`` says it
once per connection instead, and ``warren_cron.runtime.chatter`` turns those library lines
into DEBUG lines.
"""

from __future__ import annotations

import asyncio
import time

import structlog
from aio_pika.abc import AbstractConnection, AbstractRobustConnection

log = structlog.get_logger("broker")


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
