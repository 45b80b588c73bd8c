"""The ledger task: ``CRON_HANDLER_MODULES=chaoslib.worker_tasks`` (chaos runs, fault tests)."""

from __future__ import annotations

from chaoslib.ledger_handlers import LedgerHandler
from worker import task

#: The task every fault test publishes; its payload says how the attempt behaves.
TASK = "ledgered"

ledgered = task(TASK)(LedgerHandler())
