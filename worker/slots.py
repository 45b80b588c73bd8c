"""Concurrency limits by key across every worker: at most N attempts of a task, or of a task
per value of one payload field, run at once.

A slot is an exclusive queue ``<ns>_slot.<key digest>.<i>``, ``i`` below N, declared on a
connection the attempt opens for itself, as an overlap lock is (``worker/overlap.py``): only
one connection can hold an exclusive queue and the broker deletes it with its connection, so
a worker that dies frees its slots at once, on any host. An attempt that finds every slot
held is not run: it is deferred a second through the delay levels, no attempt spent, and
the worker goes on with other tasks.

``CRON_CONCURRENCY_LIMITS`` lists the limits: ``report=2`` (two ``report`` attempts at once
in the fleet), ``sync[customer]=1`` (one ``sync`` attempt per value of its payload's
``customer``), ``http[@host]=4`` (four attempts at once per destination host). A schedule
names its own in its spec (``limits.concurrency``), counted under ``schedule:<name>``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from warren_cron.broker.exclusive import plain_connection, try_exclusive
from warren_cron.envelope import Envelope
from warren_cron.errors import BROKER_TROUBLE, SettingsError
from warren_cron.flowlimits import MAX_SLOTS, digest, scoped_key
from warren_cron.names import Names
from warren_cron.runtime.settings import CronSettings
from warren_cron.worker.attempt import Outcome, Result
from warren_cron.worker.overlap import Attempt

#: The reason of an attempt deferred because every slot of its key is held.
LIMITED = "concurrency-limit"
#: Seconds a task waits before it looks for a free slot again.
WAIT_SECONDS = 1
_LIMIT = re.compile(r"^(?P<task>[\w.:-]+)(?:\[(?P<field>@host|\w{1,64})\])?=(?P<n>\d{1,4})$")


@dataclass(frozen=True, slots=True)
class Limit:
    """At most ``slots`` attempts at once of ``scope`` (a task, or ``schedule:<name>``), per
    value of ``field`` (a payload field, or ``@host``) when given."""

    scope: str
    slots: int
    field: str | None = None

    def key(self, envelope: Envelope) -> str:
        """The key this envelope's attempt counts under."""
        return scoped_key(self.scope, self.field, envelope.payload)


def parse_limits(entries: list[str]) -> dict[str, Limit]:
    """``CRON_CONCURRENCY_LIMITS`` entries by task; a clear error for a malformed one."""
    limits: dict[str, Limit] = {}
    for entry in entries:
        match = _LIMIT.match(entry.strip())
        if match is None or not 1 <= int(match["n"]) <= MAX_SLOTS:
            raise SettingsError(
                f"CRON_CONCURRENCY_LIMITS entry {entry[:200]!r} is not task=N, task[field]=N "
                f"or task[@host]=N with N from 1 to {MAX_SLOTS}, e.g. report=2,sync[customer]=1"
            )
        limits[match["task"]] = Limit(match["task"], int(match["n"]), match["field"])
    return limits


def slot_queue(namespace: str, key: str, index: int) -> str:
    """Exclusive queue that is slot ``index`` of ``key`` (by a digest: keys may be long)."""
    return Names(namespace).slot_queue(digest(key), index)


async def run_limited(
    settings: CronSettings, limit: Limit, envelope: Envelope, attempt: Attempt
) -> Result:
    """Run ``attempt`` holding one of its key's slots, or defer it when all are held."""
    key = limit.key(envelope)
    try:
        connection = await plain_connection(settings, f"warren-slot {key}", 30)
    except BROKER_TROUBLE as error:
        return _deferred(key, f"cannot reach the broker for a slot of {key}: {error!r}")
    async with connection:
        order = random.sample(range(limit.slots), limit.slots)  # spread the racers out
        for index in order:
            try:
                held = await try_exclusive(connection, slot_queue(settings.namespace, key, index))
            except BROKER_TROUBLE as error:
                return _deferred(key, f"cannot take a slot of {key}: {error!r}")
            if held is not None:
                return await attempt()
    return _deferred(key, f"all {limit.slots} slots of {key} are held")


def limited_run(
    settings: CronSettings, limits: list[Limit], envelope: Envelope, attempt: Attempt
) -> Attempt:
    """``attempt``, run holding a slot of each of its ``limits`` (none: as it is)."""
    for limit in limits:
        attempt = _in_slot(settings, limit, envelope, attempt)
    return attempt


def _in_slot(settings: CronSettings, limit: Limit, envelope: Envelope, attempt: Attempt) -> Attempt:
    return lambda: run_limited(settings, limit, envelope, attempt)


def _deferred(key: str, why: str) -> Result:
    error = f"{why}; deferred {WAIT_SECONDS} s"
    return Result(Outcome.DEFERRED, LIMITED, error, retry_after=WAIT_SECONDS, key=key)
