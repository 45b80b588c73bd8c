"""The runs waiting on the broker for a later attempt, counted from the queues' depths.

A run retrying is a message in a retry queue (``<ns>_scheduler_retry.<plan>``, until its TTL
sends it back) or in a delay level (``<ns>_delay.<n>``: a retry at the time an endpoint asked
for, a deferral, an enqueue with ``--delay``). The queues are counted rather than the history:
a one-off run has no schedule to be counted under, a history event can be dropped or aged
out, and a message waits where it waits. One message is one run. AMQP cannot list queues, so
the retry queues counted are those of the plans the caller knows (``broker/depths.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from warren_cron.broker.depths import QueueRow


@dataclass(frozen=True, slots=True)
class Waiting:
    """Runs in the retry queues and runs in the delay levels."""

    in_retry_queues: int
    in_delay_levels: int

    @property
    def total(self) -> int:
        """Every run waiting for a later attempt."""
        return self.in_retry_queues + self.in_delay_levels


def waiting_in(rows: Iterable[QueueRow]) -> Waiting:
    """The runs waiting in the retry queues and delay levels among ``rows``."""
    retry = delayed = 0
    for row in rows:
        if row.role == "retry":
            retry += row.messages or 0
        elif row.role == "delayed":
            delayed += row.messages or 0
    return Waiting(retry, delayed)
