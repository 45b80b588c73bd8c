"""Cancel runs: one by id, or the runs of schedules by pattern and state (bulk). The command,
the HTTP API, the run page and the client's ``RunHandle.cancel`` call these.

A cancel reads the run's state first (a run that ended is left as it is), then stores its
tombstone and tells the history (``cancel/request.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from types import TracebackType
from typing import Protocol

from aio_pika.abc import AbstractChannel, AbstractConnection
from aiormq.exceptions import ChannelInvalidStateError

from warren_cron.broker.connect import publish_channel
from warren_cron.cancel.request import CancelAnswer, cancel_run
from warren_cron.cancel.select import cancellable_runs
from warren_cron.cancel.stream import declare_cancels
from warren_cron.cancel.tombstone import checked_reason, checked_run_id
from warren_cron.errors import broker_failures
from warren_cron.history.lifecycle import RunStatus
from warren_cron.names import Names
from warren_cron.ops.runs import run_status

#: Waits before storing a cancel again on a channel closed under it: a robust connection
#: reconnects within a second or two; a broker that stays down is said after these.
STORE_RETRY_SECONDS = (1.0, 2.0)


class RunAccess(Protocol):
    """What a cancel needs: the history stream to read and a channel to write the cancel."""

    async def history_access(self) -> tuple[AbstractConnection, str]:
        """A connection and the history stream's name."""

    async def cancel_access(self) -> tuple[AbstractChannel, Names]:
        """A channel with publisher confirms (the cancels stream declared) and the names."""


class ChannelAccess:
    """``RunAccess`` on a process's own connection (the monitor's): a channel of its own,
    opened at the first cancel and closed on leaving the ``async with``."""

    def __init__(self, connection: AbstractConnection, names: Names) -> None:
        self.connection, self.names = connection, names
        self._channel: AbstractChannel | None = None

    async def history_access(self) -> tuple[AbstractConnection, str]:
        """The connection and the namespace's history stream."""
        return self.connection, self.names.history_stream

    async def cancel_access(self) -> tuple[AbstractChannel, Names]:
        """A channel with confirms, the cancels stream declared first."""
        if self._channel is None:
            await declare_cancels(self.connection, self.names)
            self._channel = await publish_channel(self.connection)
        return self._channel, self.names

    async def __aenter__(self) -> ChannelAccess:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._channel is not None:
            await self._channel.close()


async def cancel(
    access: RunAccess,
    run_id: str,
    reason: str | None,
    by: str,
    due: datetime | None = None,
    until: datetime | None = None,
) -> CancelAnswer:
    """Cancel one run: not started, it never starts; running, its attempt is stopped. A run
    that ended is left as it is (``cancelled`` False). ``CancelError`` for a bad run id or
    reason, ``BrokerUnavailable`` when the broker fails under the call."""
    checked_run_id(run_id)  # before reading the history for it
    reason = checked_reason(reason)
    with broker_failures(f"the status of run {run_id!r}"):
        connection, stream = await access.history_access()
        status = await run_status(connection, stream, run_id, due)
    with broker_failures(f"the cancel of run {run_id!r}"):
        return await _stored(access, status, by, reason, until)


async def _stored(
    access: RunAccess, status: RunStatus, by: str, reason: str | None, until: datetime | None
) -> CancelAnswer:
    """Store the cancel, again on a channel closed under it: RabbitMQ 3.x closes a connection
    that writes to a stream declared a moment before (the client's first cancel in a new
    namespace), and its robust connection is back within a second. Storing it twice is
    harmless: a tombstone is a fact, and two hold as one."""
    for wait in (*STORE_RETRY_SECONDS, None):
        try:
            channel, names = await access.cancel_access()
            return await cancel_run(channel, names, status, by, reason, until)
        except ChannelInvalidStateError:
            if wait is None:
                raise
            await asyncio.sleep(wait)
    raise AssertionError("unreachable: the last try raises")


async def cancellable(
    access: RunAccess, schedule: str, state: str | None, since: datetime, limit: int
) -> list[RunStatus]:
    """The newest ``limit`` runs of schedules matching ``schedule`` (a glob) with events since
    ``since``, in ``state`` (None: any not ended): what a bulk cancel takes."""
    with broker_failures("the read of the runs to cancel"):
        connection, stream = await access.history_access()
        return await cancellable_runs(connection, stream, schedule, state, since, limit)


@dataclass(slots=True)
class BulkCancel:
    """What a bulk cancel did: each run found, with its answer, in order."""

    answers: list[tuple[RunStatus, CancelAnswer]] = field(default_factory=list)

    @property
    def cancelled(self) -> int:
        """Runs cancelled (or cancelled already)."""
        return sum(answer.cancelled for _, answer in self.answers)

    @property
    def missed(self) -> int:
        """Runs that ended before their cancel."""
        return len(self.answers) - self.cancelled


#: Told of each run of a bulk cancel as soon as its cancel is answered.
Told = Callable[[RunStatus, CancelAnswer], None]


async def cancel_each(
    access: RunAccess,
    found: list[RunStatus],
    reason: str | None,
    by: str,
    told: Told | None = None,
) -> BulkCancel:
    """Cancel each run of ``found`` (``cancellable``'s), one after the other; ``told`` hears
    of each at once (a long bulk cancel shows its progress)."""
    done = BulkCancel()
    for status in found:
        answer = await cancel(access, status.run_id, reason, by)
        done.answers.append((status, answer))
        if told is not None:
            told(status, answer)
    return done
