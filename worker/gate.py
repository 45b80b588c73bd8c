"""The fleet-wide limits of one attempt: the worker's own (``CRON_CONCURRENCY_LIMITS``,
``CRON_RATE_LIMITS``, by task) and its schedule's (``limits`` in the spec, carried by the
task message, counted under ``schedule:<name>``). A start must fit every one of them.

A worker's setting may name a schedule (``schedule:nightly=2``, ``schedule:sync=10/1m``):
it is used for that schedule's runs instead of the limits their messages carry. A task with
no limit pays a few look-ups (``plain``).
"""

from __future__ import annotations

from typing import TypeVar

from aio_pika.abc import AbstractConnection

from warren_cron.envelope import Envelope
from warren_cron.worker.attempt import Result
from warren_cron.worker.overlap import Attempt
from warren_cron.worker.rates import RateRule, Windows, parse_rates
from warren_cron.worker.settings import WorkerSettings
from warren_cron.worker.slots import Limit, limited_run, parse_limits

#: The prefix of a limit's scope that names a schedule (in the settings and in keys).
SCHEDULE = "schedule:"
Rule = TypeVar("Rule", Limit, RateRule)


def scope_of(envelope: Envelope) -> str:
    """What a schedule's own limits count under: its name (a task's for a run without one)."""
    return f"{SCHEDULE}{envelope.schedule or envelope.task}"


class Gate:
    """Rate windows and concurrency slots of each attempt."""

    def __init__(self, settings: WorkerSettings) -> None:
        self._settings = settings
        self._limits, self._schedule_limits = _split(parse_limits(settings.concurrency_limits))
        self._rates, self._schedule_rates = _split(parse_rates(settings.rate_limits))
        # At most half the prefetch waits for a window: the rest of it keeps other tasks going.
        self._windows = Windows(settings.namespace, max(1, settings.prefetch // 2))

    def start(self, connection: AbstractConnection) -> None:
        """Take rate windows on ``connection``."""
        self._windows.start(connection)

    def plain(self, envelope: Envelope) -> bool:
        """True when no rate and no concurrency limit applies to an attempt (most)."""
        if envelope.limits is not None or envelope.task in self._rates:
            return False
        if envelope.task in self._limits:
            return False
        schedule = envelope.schedule
        return schedule not in self._schedule_rates and schedule not in self._schedule_limits

    def rates(self, envelope: Envelope) -> list[RateRule]:
        """The rate rules of an attempt (empty for most)."""
        rule = self._rates.get(envelope.task)
        found = [] if rule is None else [rule]
        if self._schedule_rates and envelope.schedule in self._schedule_rates:
            found.append(self._schedule_rates[envelope.schedule])
        elif envelope.limits is not None and (own := envelope.limits.parsed_rate) is not None:
            found.append(RateRule(scope_of(envelope), own, envelope.limits.key))
        return found

    async def admit(self, rules: list[RateRule], envelope: Envelope) -> Result | None:
        """None when the start fits each rule's window, else the first deferral."""
        for rule in rules:
            if (deferred := await self._windows.admit(rule.key(envelope), rule.rate)) is not None:
                return deferred
        return None

    def limited(self, envelope: Envelope, attempt: Attempt) -> Attempt:
        """``attempt``, run holding a slot of each of its concurrency limits."""
        limit = self._limits.get(envelope.task)
        found = [] if limit is None else [limit]
        if self._schedule_limits and envelope.schedule in self._schedule_limits:
            found.append(self._schedule_limits[envelope.schedule])
        elif envelope.limits is not None and (own := envelope.limits.concurrency) is not None:
            found.append(Limit(scope_of(envelope), own, envelope.limits.key))
        return limited_run(self._settings, found, envelope, attempt) if found else attempt


def _split(rules: dict[str, Rule]) -> tuple[dict[str, Rule], dict[str | None, Rule]]:
    """Rules by task, and the ``schedule:<name>`` ones by schedule name (a worker's setting
    for a schedule is used instead of the limits its messages carry)."""
    tasks = {name: rule for name, rule in rules.items() if not name.startswith(SCHEDULE)}
    schedules: dict[str | None, Rule] = {
        name.removeprefix(SCHEDULE): rule
        for name, rule in rules.items()
        if name.startswith(SCHEDULE)
    }
    return tasks, schedules
