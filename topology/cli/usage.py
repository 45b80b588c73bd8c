"""What every command line shares at no cost: exit codes, usage errors, the retry-plan options
and the closed-pipe rule.

Apart from ``common`` so that ``warren --help`` and a subcommand's ``--help`` load no more than
the standard library: the settings, the broker's client and the log machinery come in only with
the subcommand that runs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

EXIT_OK = 0
#: Some records could not be moved, none matched where one was asked for, or the user declined.
EXIT_PARTIAL = 1
EXIT_USAGE = 2
EXIT_BROKER = 3


class UsageError(ValueError):
    """Bad command-line input."""


def add_plan_options(group: argparse._ActionsContainer) -> None:
    """``--max-retries``, ``--delay-ms`` and ``--multiplier``: a retry plan of the command's own."""
    group.add_argument("--max-retries", type=int, help="retries after the first attempt")
    group.add_argument("--delay-ms", type=int, help="delay before the first retry")
    group.add_argument("--multiplier", type=float, help="growth of each further delay")


def quiet_on_closed_pipe(main: Callable[[], int]) -> int:
    """``main()``'s exit code; a reader that stopped reading (``| head``) ends it with 0 and
    no traceback, as for any Unix filter."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout once more on the way out: that flush must not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return code
