"""Where a run stands as a monitor tells it, now or once it ended: the HTTP API's
``GET /api/v1/runs/{id}`` and its long poll (``?wait=``).

A monitor waits on its own follow of the history: each event of the run sets ``woken``, and
the run is read again (from memory when the monitor keeps it). A read of the stream refused
while other reads run is tried again at the run's next event, which memory may answer; a
command or an application waits with ``ops.runs.wait_for_end`` instead, on a follow of its
own.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from warren_cron.clock import utcnow
from warren_cron.history.lifecycle import RunStatus, status_of
from warren_cron.history.reader import Budget
from warren_cron.ops.runs import FollowedHistory, Scan, shown_run
from warren_cron.ops.scans import ScanRefused

#: A run's status (None: no event of it) and the budget of the read, if the stream was read.
Shown = tuple[RunStatus | None, Budget | None]


async def shown_status(history: FollowedHistory, run_id: str, scan: Scan) -> Shown:
    """Where the run stands, from the runs the monitor keeps, else from its story read
    through ``scan``; ``ScanRefused`` when the read is refused."""
    run, budget = await shown_run(history, run_id, scan)
    return (None if run is None else status_of(run_id, run, utcnow())), budget


async def waited_status(
    history: FollowedHistory,
    run_id: str,
    scan: Scan,
    woken: asyncio.Event,
    wait: float,
    stopping: Callable[[], bool],
) -> Shown:
    """The run's status once it ended, or when ``wait`` seconds passed, or at once when
    ``stopping``; ``ScanRefused`` when its read is still refused at the end."""
    deadline = asyncio.get_running_loop().time() + wait
    while True:
        woken.clear()  # before the read: an event landing during it wakes the wait below
        status, budget, refused = await _tried(history, run_id, scan)
        left = deadline - asyncio.get_running_loop().time()
        over = left <= 0 or stopping()  # the monitor stops: answer now
        if (status is not None and status.done) or over:
            if refused is not None:
                raise refused
            return status, budget
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(woken.wait(), left)


async def _tried(
    history: FollowedHistory, run_id: str, scan: Scan
) -> tuple[RunStatus | None, Budget | None, ScanRefused | None]:
    """``shown_status``, or the refusal of a read while other reads run."""
    try:
        status, budget = await shown_status(history, run_id, scan)
    except ScanRefused as refused:
        if not refused.busy:
            raise
        return None, None, refused
    return status, budget, None
