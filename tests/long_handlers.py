"""The long-job tests' handlers on the default registry, for ``warren worker`` processes
(``CRON_HANDLER_MODULES=tests.long_handlers``): each declares a heartbeat, so it runs long."""

from __future__ import annotations

from tests.long_worker import hangs_once, long_sleep
from warren_cron.worker.registry import default_registry

default_registry.register("long_sleep", long_sleep, heartbeat=1)
default_registry.register("hangs_once", hangs_once, heartbeat=0.5)
