"""Startup, liveness and readiness: what each long-running process answers on its probes.

Served beside ``/metrics`` on ``CRON_METRICS_PORT`` (``runtime/metrics.py``):

=============  ================================================================  ============
path           200 while                                                         broker?
=============  ================================================================  ============
``/startupz``  the readiness checks have all passed once since the process began  once
``/livez``     the process's event loop turns: a tick within ``LOOP_STALE_SECONDS``  never
``/readyz``    the process's own checks pass: its broker connection, a consumer   yes
``/healthz``   the same as ``/readyz`` (kept for compose and older probes)        yes
=============  ================================================================  ============

Liveness never asks the broker: an orchestrator restarts a process whose liveness fails, and
restarting every worker because the broker is away helps nothing (the worker reconnects by
itself); a loop that stopped turning (a handler blocking it, a deadlock) is what a restart
cures.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping

#: A named check: True while it passes.
Check = Callable[[], bool]
#: Named checks that an answer reports, e.g. ``{"broker-connection": worker.connected}``.
Checks = Mapping[str, Check]

#: Every path that answers with checks rather than metrics.
PROBE_PATHS = ("/livez", "/readyz", "/startupz", "/healthz")
#: How often the event loop records that it turns.
LOOP_TICK_SECONDS = 1.0
#: A loop silent this long fails ``/livez``: far above any pause the process makes on purpose
#: (a full garbage collection of 100,000 schedules takes about 0.1 s).
LOOP_STALE_SECONDS = 15.0


class Pulse:
    """The event loop's heartbeat, read from the probe server's thread."""

    def __init__(
        self,
        stale_after: float = LOOP_STALE_SECONDS,
        tick: float = LOOP_TICK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        watch: Check | None = None,
    ) -> None:
        self._stale_after = stale_after
        #: Asked at every tick, in the loop: a start is seen even if no probe asked then.
        self._watch = watch
        self._tick = tick
        self._clock = clock
        self._last = clock()

    async def run(self) -> None:
        """Tick until cancelled."""
        while True:
            self._last = self._clock()
            if self._watch is not None:
                self._watch()
            await asyncio.sleep(self._tick)

    def alive(self) -> bool:
        """True while the loop ticked less than ``stale_after`` seconds ago."""
        return self._clock() - self._last < self._stale_after


def ever(checks: Checks) -> Check:
    """A check that passes from the first time every one of ``checks`` passed together on:
    a process has started once it was ready once (``/startupz``)."""
    seen = False

    def started() -> bool:
        nonlocal seen
        seen = seen or all(check() for check in checks.values())
        return seen

    return started


def probe_checks(ready: Checks, live: Checks, started: Check) -> dict[str, Checks]:
    """The checks behind each probe path, from a process's readiness and liveness checks and
    its start (``ever(ready)``, watched by its ``Pulse``)."""
    return {"/livez": live, "/readyz": ready, "/startupz": {"started": started}}
