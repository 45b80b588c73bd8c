"""Rate limits across every worker: at most ``limit`` starts per ``period`` with a ``burst``,
per task, per value of a payload field, or per http destination host; kept by the broker.

A key's window is the queue ``<ns>_rate.<digest of key and rate>``: ``x-max-length`` =
burst, ``x-overflow: reject-publish`` and a message TTL of ``burst * period / limit``. An
attempt starts only once the broker confirms the mark it publishes there (one round trip);
a full window NACKs it, and the attempt is deferred a second through the delay levels, no
attempt spent, while the worker goes on with other tasks. Each mark leaves the window when
its TTL ends, so at most ``burst`` starts fall in any window and no more than ``limit`` per
``period`` over time. No worker refills anything, so any number of keys needs no loop and
no lock; a window unused for ``x-expires`` (a minute, or three windows) is deleted by the
broker, so keys seen once leave nothing behind.

``CRON_RATE_LIMITS`` lists them: ``report=10/1s``, ``sync=100/5m:5``, ``sync[customer]=2/1s``
(per value of the payload's ``customer``), ``http[@host]=20/1s`` (per destination host).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from aio_pika.abc import AbstractChannel, AbstractConnection
from aiormq.exceptions import DeliveryError, PublishError

from warren_cron.broker.connect import owned_publish_channel
from warren_cron.broker.underlay import RawChannel, underlay
from warren_cron.envelope import Envelope
from warren_cron.errors import BROKER_TROUBLE, SettingsError
from warren_cron.flowlimits import Rate, digest, parse_rate, scoped_key
from warren_cron.names import Names
from warren_cron.worker.attempt import Outcome, Result

#: The reason of an attempt deferred because its key's window is full.
RATE_LIMITED = "rate-limit"
#: Seconds a task waits before it tries its window again.
WAIT_SECONDS = 1
#: Seconds a worker trusts its own declaration of a window before declaring it again (a
#: declaration renews the window's ``x-expires``; a publish does not).
REDECLARE_SECONDS = 10.0
#: Windows a worker remembers having declared; past that the oldest are declared again.
MAX_REMEMBERED = 4096
#: Least ``x-expires`` of a window, in seconds.
MIN_EXPIRES_SECONDS = 60.0
#: How long a start whose window is full looks again before it is deferred, and how often.
POLL_FOR_SECONDS = 1.0
MIN_POLL_SECONDS = 0.05
MAX_POLL_SECONDS = 0.25
FULL = "window full"
_TROUBLE: tuple[type[BaseException], ...] = (*BROKER_TROUBLE, TimeoutError)
_ENTRY = re.compile(r"^(?P<task>[\w.:-]+)(?:\[(?P<field>@host|\w{1,64})\])?=(?P<rate>.+)$")


@dataclass(frozen=True, slots=True)
class RateRule:
    """At most ``rate`` starts of ``scope``, per value of ``field`` when given."""

    scope: str
    rate: Rate
    field: str | None = None

    def key(self, envelope: Envelope) -> str:
        """The key this envelope's start counts under."""
        return scoped_key(self.scope, self.field, envelope.payload)


def parse_rates(entries: list[str]) -> dict[str, RateRule]:
    """``CRON_RATE_LIMITS`` entries by task; a clear error for a malformed one."""
    rules: dict[str, RateRule] = {}
    for entry in entries:
        match = _ENTRY.match(entry.strip())
        try:
            rate = parse_rate(match["rate"]) if match else None
        except ValueError:
            rate = None
        if match is None or rate is None:
            raise SettingsError(
                f"CRON_RATE_LIMITS entry {entry[:200]!r} is not task=N/PERIOD[:BURST], "
                "task[field]=... or task[@host]=..., with N and BURST at least 1 and PERIOD "
                "like 1s, 5m or h, e.g. report=10/1s,sync=100/1m:5,http[@host]=20/1s"
            )
        rules[match["task"]] = RateRule(match["task"], rate, match["field"])
    return rules


def window_queue(namespace: str, key: str, rate: Rate) -> str:
    """The queue of ``key``'s window at ``rate`` (a changed rate is a new window)."""
    return Names(namespace).rate_window(digest(f"{key} {rate.text}"))


def window_arguments(rate: Rate) -> dict[str, Any]:
    """The arguments of a window queue."""
    # Well past the redeclaration: a window in use must never expire (its marks would go,
    # and the next start would find a new, empty one).
    expires = max(MIN_EXPIRES_SECONDS, 3 * rate.window, 3 * REDECLARE_SECONDS)
    return {
        "x-queue-type": "classic",
        "x-max-length": rate.burst,
        "x-overflow": "reject-publish",
        "x-message-ttl": max(1, round(rate.window * 1000)),
        "x-expires": round(expires * 1000),
    }


class Windows:
    """Takes a place in a key's window for each rate-limited start of this worker."""

    def __init__(self, namespace: str, max_waiting: int = 1) -> None:
        self._namespace = namespace
        self._max_waiting = max_waiting
        self._waiting = 0
        self._connection: AbstractConnection | None = None
        self._channel: AbstractChannel | None = None
        self._opening = asyncio.Lock()
        self._declared: OrderedDict[str, float] = OrderedDict()

    def start(self, connection: AbstractConnection) -> None:
        """Use ``connection``; a channel is opened at the first rate-limited start."""
        self._connection = connection

    async def admit(self, key: str, rate: Rate) -> Result | None:
        """None when the start fits in ``key``'s window (and is counted there), else a
        deferral; a full window is tried again for up to a second first, by at most
        ``max_waiting`` attempts of this worker at once."""
        result = await self._take(key, rate)
        if result is None or result.error is None or not result.error.startswith(FULL):
            return result
        if self._waiting >= self._max_waiting:
            return result
        self._waiting += 1
        try:
            return await self._wait(key, rate)
        finally:
            self._waiting -= 1

    async def _wait(self, key: str, rate: Rate) -> Result | None:
        # A deferral comes back a whole second later, whenever the window frees in between:
        # looking again a few times within the second keeps the pace close to the rate.
        pause = min(max(rate.window / rate.burst / 2, MIN_POLL_SECONDS), MAX_POLL_SECONDS)
        until = time.monotonic() + POLL_FOR_SECONDS
        while True:
            await asyncio.sleep(pause)
            result = await self._take(key, rate)
            if result is None or time.monotonic() + pause > until:
                return result

    async def _take(self, key: str, rate: Rate) -> Result | None:
        name = window_queue(self._namespace, key, rate)
        try:
            # On aiormq's channel: aio-pika's robust one would keep every queue declared.
            raw = await underlay(await self._open())
            await self._declare(raw, name, rate)
            async with asyncio.timeout(10):
                await raw.basic_publish(b"", routing_key=name, mandatory=True)
        except PublishError:  # returned: the window vanished; declared again next time
            self._declared.pop(name, None)
            return _deferred(key, f"the window of {key} was gone")
        except DeliveryError:
            return _deferred(key, f"{FULL}: {rate.burst} starts of {key} in {rate.window:g} s")
        except _TROUBLE as error:
            return _deferred(key, f"cannot reach the window of {key}: {error!r}")
        return None

    async def _open(self) -> AbstractChannel:
        async with self._opening:
            if self._channel is None or self._channel.is_closed:
                assert self._connection is not None, "Windows.start was not called"
                # Its own: a robust channel the broker closed (a window declared with other
                # arguments) reopened itself beside the new one, a channel more each time.
                self._channel = await owned_publish_channel(self._connection)
                self._declared.clear()
            return self._channel

    async def _declare(self, raw: RawChannel, name: str, rate: Rate) -> None:
        now = time.monotonic()
        if now - self._declared.get(name, -REDECLARE_SECONDS) < REDECLARE_SECONDS:
            return
        await raw.queue_declare(name, durable=True, arguments=window_arguments(rate))
        self._declared[name] = now
        self._declared.move_to_end(name)
        while len(self._declared) > MAX_REMEMBERED:
            self._declared.popitem(last=False)


def _deferred(key: str, why: str) -> Result:
    error = f"{why}; deferred {WAIT_SECONDS} s"
    return Result(Outcome.DEFERRED, RATE_LIMITED, error, retry_after=WAIT_SECONDS, key=key)
