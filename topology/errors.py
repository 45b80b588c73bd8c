"""Every error warren raises on purpose, under one root.

::

    WarrenError
     ├── ConfigError              wrong configuration: the process exits 2, naming the fix
     │    ├── SettingsError        CRON_* variables (each named, its value never shown)
     │    ├── ScheduleError        the schedules file (a line per schedule and field)
     │    ├── TimingError          a cron expression, time zone or interval
     │    ├── PlanError            a retry plan or routing key
     │    ├── EnqueueError         arguments of an enqueue (a naive time, a ttl before due)
     │    └── HandlerImportError   a module of CRON_HANDLER_MODULES
     ├── BrokerError              RabbitMQ: the process exits 3
     │    ├── BrokerUnavailable    not reachable at start, or failed under a client's call
     │    │    ├── Unconfirmed     a create of a bulk the broker did not confirm (a StoreError)
     │    │    └── CreatesCut      a bulk create cut short: ``results`` says what became of each
     │    └── TopologyError        a queue exists with other arguments than this config's
     ├── StoreError               a change to the runtime schedules that cannot be made
     │    ├── InvalidSchedule      a spec or change that does not validate (each field named)
     │    ├── ScheduleNotFound     no runtime schedule of that name
     │    ├── NameTaken            the name is used (by the file, or by a live schedule)
     │    └── VersionConflict      another change came first: read again, then retry
     ├── MessageDecodeError       a body that is not a task envelope
     └── TaskError                raised by handlers to say how an attempt failed
          ├── RetryableError       try again while the plan allows
          └── PermanentError       no retry can help: straight to the failed queue
               ├── DestinationDenied   the http task's destination is refused by policy
               └── SecretUnavailable   a secret a header names cannot be read

Each ``TaskError`` class names the ``reason`` its failures are recorded with (failure records,
history events, the ``reason`` label of metrics).

Any other exception a handler raises counts as retryable.

The client libraries raise their own exceptions for a broker in trouble; ``BROKER_TROUBLE``
is the one family of them that loops catch to reconnect or retry, instead of crashing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import ClassVar

from aiormq.exceptions import AMQPConnectionError, AMQPError, ChannelInvalidStateError
from pydantic import ValidationError
from pydantic_core import ErrorDetails

Loc = tuple[int | str, ...]


class WarrenError(Exception):
    """Root of every error warren raises on purpose."""


class ConfigError(WarrenError, ValueError):
    """Configuration that cannot work; the message names what is wrong and how to fix it."""


class SettingsError(ConfigError):
    """Invalid ``CRON_*`` settings; the message names each variable and what to do."""


class ScheduleError(ConfigError):
    """An invalid schedules file; ``problems`` has one line per schedule and field."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        lines = "\n".join(f"  {problem}" for problem in problems)
        super().__init__(f"{source}: invalid schedules file:\n{lines}")


class TimingError(ConfigError):
    """A cron expression, time zone or interval that cannot be used."""


class PlanError(ConfigError):
    """A retry plan or routing key that cannot be used."""


class EnqueueError(ConfigError):
    """An enqueue whose arguments cannot work; the message names the argument."""


class HandlerImportError(ConfigError):
    """A module listed in ``CRON_HANDLER_MODULES`` could not be imported."""


class BrokerError(WarrenError, RuntimeError):
    """RabbitMQ could not be used as this configuration needs."""


class BrokerUnavailable(BrokerError):
    """The broker could not be reached at start."""


class TopologyError(BrokerError):
    """The broker holds an object whose arguments differ from what this config needs."""


class CancelError(WarrenError, ValueError):
    """A cancel that cannot be made as asked (a bad run id, a reason too long); the message
    says what to fix."""


class StoreError(WarrenError):
    """A change to the runtime schedules that cannot be made; the message says what to do."""


class InvalidSchedule(StoreError, ValueError):
    """A schedule or change that does not validate; ``problems`` has one line per field."""

    def __init__(self, name: str, problems: list[str]) -> None:
        self.name = name
        self.problems = problems
        super().__init__(f"schedule {name!r}: " + "; ".join(problems))


class ScheduleNotFound(StoreError, LookupError):
    """No runtime schedule of that name (file schedules are changed in the file)."""


class NameTaken(StoreError):
    """The name is used by a schedule of the file, or by a live runtime schedule."""


class VersionConflict(StoreError):
    """The change named a version that is no longer the schedule's: read it again, then retry."""

    def __init__(self, name: str, expected: int, current: int) -> None:
        self.name = name
        self.expected = expected
        self.current = current
        super().__init__(
            f"schedule {name!r}: the change was based on version {expected}, but version "
            f"{current} is current (another change came first); get the schedule again, "
            "check the change still applies, and retry with version="
            f"{current}"
        )


class Unconfirmed(StoreError, BrokerUnavailable):
    """One create of a bulk that the broker did not confirm: it may be stored or not
    (``get_schedule`` tells); ``error`` is what the broker failed with."""

    def __init__(self, name: str, error: BaseException) -> None:
        self.name, self.error = name, error
        super().__init__(
            f"schedule {name!r}: not confirmed, the broker failed ({type(error).__name__}); "
            "it may be stored or not: get it to know, create it again if it is not"
        )


class CreatesCut(BrokerUnavailable):
    """A bulk create cut short by the broker; ``results`` has, per spec in the order given,
    the schedule stored, the ``StoreError`` that refused it, or ``Unconfirmed``."""

    def __init__(self, results: Sequence[object]) -> None:
        self.results = list(results)
        unsure = sum(isinstance(result, Unconfirmed) for result in results)
        super().__init__(
            f"the broker failed during the creates: {unsure} of {len(results)} not confirmed "
            "(``results`` says which were stored); create those again once it is back"
        )


class RunFailed(WarrenError):
    """A run ended without a result: ``state`` is failed, expired or cancelled, ``error`` why."""

    def __init__(self, run_id: str, state: str, error: str | None) -> None:
        self.run_id, self.state, self.error = run_id, state, error
        super().__init__(f"run {run_id} {state}: {error or 'no error recorded'}")


class RunTimeout(WarrenError, TimeoutError):
    """A run did not end within the time waited for it; it may still end later."""


class MessageDecodeError(WarrenError, ValueError):
    """A message body that is not a valid task envelope."""


class TaskError(WarrenError):
    """Base of the errors a handler may raise on purpose."""

    #: The reason a failed attempt is recorded with.
    reason: ClassVar[str] = "exception"


class RetryableError(TaskError):
    """A failure that may pass on a later attempt (a 503, a timeout, a lost connection)."""


class PermanentError(TaskError):
    """A failure that no retry can fix (bad input, a 404): the task fails at once."""

    reason: ClassVar[str] = "permanent-error"


class DestinationDenied(PermanentError):
    """The http task's host or address is refused by CRON_HTTP_ALLOW / CRON_HTTP_DENY."""

    reason: ClassVar[str] = "destination-denied"


class SecretUnavailable(PermanentError):
    """A ``{ env = ... }`` or ``{ file = ... }`` reference that cannot be resolved here."""

    reason: ClassVar[str] = "secret-unavailable"


def _dotted(loc: Loc) -> str:
    return ".".join(str(part) for part in loc)


def _message(item: ErrorDetails) -> str:
    return item["msg"]


def validation_problems(
    error: ValidationError,
    *,
    where: Callable[[Loc], str] = _dotted,
    what: Callable[[ErrorDetails], str] = _message,
    whole: str = "",
) -> list[str]:
    """``where: what`` for each problem of ``error``, ``whole`` naming the input itself.

    The input values are never shown: they may be secrets (a URL's password, a token).
    """
    lines = []
    for item in error.errors(include_url=False, include_input=False):
        place = where(item["loc"]) or whole
        lines.append(f"{place}: {what(item)}" if place else what(item))
    return lines


#: The connection is gone or cannot be made: wait for the broker, don't crash.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    AMQPConnectionError,
    ConnectionError,
    OSError,
    TimeoutError,
    BrokerUnavailable,
)
#: An operation failed on the broker's side (the connection, a channel the broker closed, a
#: channel already gone): retry it on a fresh channel or connection.
BROKER_TROUBLE: tuple[type[BaseException], ...] = (
    *CONNECTION_ERRORS,
    AMQPError,
    ChannelInvalidStateError,
)
#: ``BROKER_TROUBLE`` and the CancelledError that aiormq fails the calls under way with on a
#: connection it dropped as stuck (no frame within the heartbeat timeout), which is no cancel
#: of the caller's task: whoever catches it re-raises it while its task is being cancelled
#: (``being_cancelled``).
BROKER_CUT: tuple[type[BaseException], ...] = (*BROKER_TROUBLE, asyncio.CancelledError)
#: Any failure of a call, with the CancelledError aiormq fails it with on a dropped
#: connection: for a step whose every failure has one answer (log it, try again, fall back);
#: whoever catches it re-raises it while its task is being cancelled (``being_cancelled``).
FAILED_OR_CUT: tuple[type[BaseException], ...] = (Exception, asyncio.CancelledError)


def being_cancelled() -> bool:
    """True when the running task is being cancelled: a broker error raised then may be
    aiormq's answer to the cancel (it closes the channel of a cancelled call), not its own,
    and a ``CancelledError`` is this cancel, not aiormq's word for a dropped connection."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


@contextmanager
def cuts_logged(warn: Callable[..., object], message: str) -> Iterator[None]:
    """Pass a broker error in this block (``BROKER_CUT``) to ``warn`` with ``message`` and go
    on, for a loop that tries again next round; a cancel of this task still ends it."""
    try:
        yield
    except BROKER_CUT as error:
        if being_cancelled():
            raise
        warn(message, error=repr(error))


@contextmanager
def broker_failures(what: str) -> Iterator[None]:
    """Raise the client libraries' broker errors in this block as ``BrokerUnavailable``
    saying that ``what`` may not have been done; warren's own errors pass as they are."""
    try:
        yield
    except WarrenError:
        raise
    except BROKER_CUT as error:
        if isinstance(error, asyncio.CancelledError) and being_cancelled():
            raise  # a cancel of the caller's task stays a cancel
        # The type only: a library's message may carry an address.
        raise BrokerUnavailable(
            f"{what}: the broker failed under the call ({type(error).__name__}), so it may "
            "not be done; try again once the broker is back"
        ) from error
