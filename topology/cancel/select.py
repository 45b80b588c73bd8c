"""The runs a bulk cancel takes: by schedule pattern and state, from the history stream."""

from __future__ import annotations

from datetime import datetime
from fnmatch import fnmatchcase

from aio_pika.abc import AbstractConnection

from warren_cron.cancel.bounds import CANCELLABLE as CANCELLABLE
from warren_cron.cancel.bounds import MAX_BULK as MAX_BULK
from warren_cron.clock import utcnow
from warren_cron.history.lifecycle import FINAL, RunStatus, status_of
from warren_cron.history.recent import recent_runs
from warren_cron.history.run_fold import Run


async def cancellable_runs(
    connection: AbstractConnection,
    stream: str,
    schedule: str,
    state: str | None,
    since: datetime,
    limit: int,
) -> list[RunStatus]:
    """The newest ``limit`` runs of schedules matching ``schedule`` (a glob) with events
    since ``since``, in ``state`` (None: any not ended), newest first."""
    now = utcnow()

    def want(run: Run) -> bool:
        if not fnmatchcase(run.schedule or "", schedule):
            return False
        found = status_of(run.run_id, run, now).state
        return found == state if state is not None else found not in FINAL

    runs = await recent_runs(connection, stream, want, limit, since, now)
    return [status_of(run.run_id, run, now) for run in runs]
