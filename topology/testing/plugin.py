"""The testing kit's pytest fixtures, loaded by pytest from the package's ``pytest11`` entry
point: installing warren-cron is enough.

Importing this module costs nothing but pytest: each fixture imports the kit when a test asks
for it, so a test suite that uses none pays nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from warren_cron.testing.eager import EagerClient
    from warren_cron.worker.settings import WorkerSettings


@pytest.fixture
def warren_eager() -> Iterator[EagerClient]:
    """An eager client, and every task handle's default client for the test: an enqueue runs
    its task in the test, as a worker would (``warren_cron.testing.eager``)."""
    from warren_cron.testing.eager import EagerClient, SyncEagerClient
    from warren_cron.worker.handles import use_clients

    eager = EagerClient()
    with SyncEagerClient(eager) as sync, use_clients(eager, sync):
        yield eager


@pytest.fixture
def warren_broker() -> Iterator[WorkerSettings]:
    """Settings for a namespace of the test's own on the broker at ``CRON_AMQP_URL``; every
    queue and exchange in it is deleted after the test (``warren namespace delete``'s work)."""
    from warren_cron.ops.namespace import delete
    from warren_cron.runtime.settings import load_settings
    from warren_cron.worker.settings import WorkerSettings

    settings = load_settings(WorkerSettings).model_copy(
        update={"namespace": f"warren_test_{uuid.uuid4().hex[:12]}"}
    )
    yield settings
    plans = [settings.default_plan().key]
    asyncio.run(delete(settings, force=True, plans=plans))
