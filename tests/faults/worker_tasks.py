"""The fault tests' worker tasks: ``CRON_HANDLER_MODULES=tests.faults.worker_tasks``."""

from __future__ import annotations

from tests.faults.ledger_handlers import LedgerHandler
from worker import task

#: The task every fault test publishes; its payload says how the attempt behaves.
TASK = "ledgered"

ledgered = task(TASK)(LedgerHandler())
