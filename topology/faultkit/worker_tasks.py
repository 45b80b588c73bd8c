"""The ledger task for chaos runs and fault tests, registered where ``CRON_HANDLER_MODULES``
names ``warren_cron.faultkit.worker_tasks``."""

from __future__ import annotations

from warren_cron.faultkit.ledger_handlers import LedgerHandler
from warren_cron.worker.registry import task

#: The task every fault test publishes; its payload says how the attempt behaves.
TASK = "ledgered"

ledgered = task(TASK)(LedgerHandler())
