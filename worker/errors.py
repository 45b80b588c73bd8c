"""Errors a handler raises to say how its attempt failed.

::

    TaskError
     ├── RetryableError    the attempt failed; try again while the plan allows
     │    └── TaskTimeout  the attempt ran past its timeout
     └── PermanentError    retrying cannot help: straight to the failed queue
    MessageDecodeError     (topology.envelope) the body is not a task envelope

Any other exception a handler raises counts as retryable.
"""

from __future__ import annotations

from topology.envelope import MessageDecodeError


class TaskError(Exception):
    """Base of the errors a handler may raise on purpose."""


class RetryableError(TaskError):
    """A failure that may pass on a later attempt (a 503, a timeout, a lost connection)."""


class TaskTimeout(RetryableError):
    """The attempt ran longer than its timeout and was stopped."""


class PermanentError(TaskError):
    """A failure that no retry can fix (bad input, a 404): the task fails at once."""


__all__ = ["MessageDecodeError", "PermanentError", "RetryableError", "TaskError", "TaskTimeout"]
