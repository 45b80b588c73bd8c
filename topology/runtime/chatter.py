"""aio-pika's and aiormq's lines about a lost connection, made DEBUG lines.

While the broker is away each reconnect try makes the libraries log a warning and an error;
``warren_cron.broker.outage`` says it once per connection instead, and these lines stay there
at ``CRON_LOG_LEVEL=DEBUG``. They are matched by logger and message template, which
``tests/test_logs.py`` finds in the installed libraries' sources, so an upgrade that changes
them fails a test.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from aio_pika import RobustChannel

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
