"""What a history publisher dropped and has not reported yet, and the event reporting it.

Each process counts its own drops in ``cron_history_events_dropped_total`` on its own
``/metrics``, but a worker without ``CRON_METRICS_PORT`` exports nothing, and a script is
gone before any scrape. So once the stream takes events again, the publisher adds one
``dropped`` event to a batch, saying how many events it lost, when, and where; the monitor,
which folds the stream, adds them up for the whole fleet (``topology/history/status_fold.py``).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

import orjson

from warren_cron.clock import now_text
from warren_cron.history.events import event


@dataclass(frozen=True, slots=True)
class Report:
    """A ``dropped`` event, encoded, and the losses it reports."""

    body: bytes
    count: int
    since: str
    until: str


class Losses:
    """Events a publisher of process kind ``process`` dropped and has not reported yet."""

    def __init__(self, process: str) -> None:
        self._where: dict[str, Any] = {
            "process": process,
            "host": socket.gethostname(),
            "pid": os.getpid(),
        }
        self.count = 0
        self._since = self._until = ""

    def add(self, count: int) -> None:
        """Count ``count`` events dropped now."""
        if count:
            self.count += count
            self._until = now_text()
            self._since = self._since or self._until

    def take(self) -> Report | None:
        """The event reporting every loss so far, which are forgotten unless ``keep`` hands
        it back; None when there is none to report."""
        if not self.count:
            return None
        fields: dict[str, Any] = {"count": self.count, "since": self._since, "until": self._until}
        body = orjson.dumps(event("dropped", **fields, **self._where))
        report = Report(body, self.count, self._since, self._until)
        self.count, self._since, self._until = 0, "", ""
        return report

    def keep(self, report: Report) -> None:
        """Count again the losses of a report the stream did not take."""
        self.count += report.count
        self._since = report.since  # the older of the two: taken before any drop since
        self._until = self._until or report.until
