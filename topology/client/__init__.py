"""Enqueue tasks from an application: ``Client`` (async) and ``SyncClient`` (any thread).

::

    from warren_cron.client import SyncClient

    with SyncClient() as client:
        done = client.enqueue("http", {"url": "https://example.com/hook"}, delay=90, ttl=3600)
        print(done.run_id)
"""

from warren_cron.cancel.request import CancelAnswer
from warren_cron.client.client import Client
from warren_cron.client.options import Enqueued, EnqueueOptions
from warren_cron.client.sync import SyncClient
from warren_cron.errors import (
    BrokerUnavailable,
    CancelError,
    CreatesCut,
    EnqueueError,
    InvalidSchedule,
    NameTaken,
    PlanError,
    ScheduleNotFound,
    StoreError,
    Unconfirmed,
    VersionConflict,
)
from warren_cron.plan import RetryPlan
from warren_cron.store.stored import StoredSchedule

__all__ = [
    "BrokerUnavailable",
    "CancelAnswer",
    "CancelError",
    "Client",
    "CreatesCut",
    "EnqueueError",
    "EnqueueOptions",
    "Enqueued",
    "InvalidSchedule",
    "NameTaken",
    "PlanError",
    "RetryPlan",
    "ScheduleNotFound",
    "StoreError",
    "StoredSchedule",
    "SyncClient",
    "Unconfirmed",
    "VersionConflict",
]
