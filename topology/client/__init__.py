"""Enqueue tasks from an application: ``Client`` (async) and ``SyncClient`` (any thread).

::

    from topology.client import SyncClient

    with SyncClient() as client:
        done = client.enqueue("http", {"url": "https://example.com/hook"}, delay=90, ttl=3600)
        print(done.run_id)
"""

from topology.client.client import Client
from topology.client.options import Enqueued, EnqueueOptions
from topology.client.sync import SyncClient
from topology.errors import BrokerUnavailable, EnqueueError, PlanError
from topology.plan import RetryPlan

__all__ = [
    "BrokerUnavailable",
    "Client",
    "EnqueueError",
    "EnqueueOptions",
    "Enqueued",
    "PlanError",
    "RetryPlan",
    "SyncClient",
]
