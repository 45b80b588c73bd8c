"""Run handles: what became of a run, and its result once it ends, from the history stream.

``status()`` reads the run's events once; ``result()`` follows the stream live from shortly
before the run's time (``topology/history/follow.py``), so it learns of the run's end as the
worker writes it, without polling any queue. Each is an operation of ``warren_cron.ops``,
which the command, the HTTP API and the dashboard call as well.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from warren_cron.cancel.request import CancelAnswer
from warren_cron.errors import RunFailed, broker_failures
from warren_cron.history.events import who
from warren_cron.history.lifecycle import RunStatus
from warren_cron.ops.runs import run_status, wait_for_end
from warren_cron.ops.runs_cancel import RunAccess, cancel


def result_of(status: RunStatus) -> Any:
    """The result of an ended run, or ``RunFailed`` with its error."""
    if status.state != "succeeded":
        raise RunFailed(status.run_id, status.state, status.error or status.reason)
    return status.result


class RunHandle:
    """One run, by id: ``await handle.status()``, ``await handle.result(timeout=60)``."""

    def __init__(self, client: RunAccess, run_id: str, due: datetime | None = None) -> None:
        self._client = client
        self.run_id = run_id
        #: When it was enqueued for, if this handle came from the enqueue.
        self.due = due

    def __repr__(self) -> str:
        return f"RunHandle({self.run_id!r})"

    async def status(self) -> RunStatus:
        """Where the run stands now: its state and every attempt."""
        with broker_failures(f"the status of run {self.run_id!r}"):
            connection, stream = await self._client.history_access()
            return await run_status(connection, stream, self.run_id, self.due)

    async def wait(self, timeout: float | None = None) -> RunStatus:
        """Wait for the run to end, however it ends, and return its status; ``RunTimeout``
        after ``timeout`` seconds."""
        with broker_failures(f"the wait for run {self.run_id!r}"):
            connection, stream = await self._client.history_access()
            return await wait_for_end(connection, stream, self.run_id, timeout)

    async def result(self, timeout: float | None = None) -> Any:
        """Wait for the run to end and return the handler's return value; ``RunFailed`` when
        it failed, expired or was cancelled, ``RunTimeout`` after ``timeout`` seconds."""
        return result_of(await self.wait(timeout))

    async def cancel(
        self, reason: str | None = None, *, by: str | None = None, until: datetime | None = None
    ) -> CancelAnswer:
        """Cancel the run: not started, it never starts; running, its attempt is stopped on
        whichever worker runs it. Either way it ends ``cancelled``. A run that ended already
        is left as it is (``cancelled`` False in the answer). ``until``: keep the cancel that
        long at least, for a run due more than 30 days ahead. ``CancelError`` for a bad
        run id or a reason over 500 characters."""
        return await cancel(self._client, self.run_id, reason, by or who(), self.due, until)
