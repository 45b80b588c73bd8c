"""``warren``: one command for every process and ops tool.

Each subcommand is a module with ``main(argv) -> int``, loaded only when it runs, so
``warren monitor`` imports none of the worker's modules and ``warren --help`` none of the
broker's, the settings' or the log machinery's. A subcommand whose command line lives in a
module of its own (``parse_args(argv)``, standard library only) answers ``--help`` from that
module alone.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import NamedTuple, cast

from warren_cron.cli.usage import EXIT_OK, EXIT_USAGE, quiet_on_closed_pipe

DISTRIBUTION = "warren-cron"


class Subcommand(NamedTuple):
    """Where a subcommand's ``main`` lives, what it does in one line, and where its light
    command line lives, if apart: ``module`` (its ``parse_args``) or ``module:function``."""

    module: str
    summary: str
    parser: str = ""


SUBCOMMANDS = {
    "worker": Subcommand(
        "warren_cron.worker.__main__",
        "consume due tasks and run them",
        "warren_cron.runtime.process_args:worker_args",
    ),
    "scheduler": Subcommand(
        "warren_cron.scheduler.__main__",
        "publish each schedule's fires",
        "warren_cron.runtime.process_args:scheduler_args",
    ),
    "monitor": Subcommand(
        "warren_cron.monitor.__main__",
        "log and alert on failed tasks",
        "warren_cron.runtime.process_args:monitor_args",
    ),
    "enqueue": Subcommand(
        "warren_cron.cli.enqueue", "enqueue one task, now or later", "warren_cron.cli.enqueue_args"
    ),
    "failed": Subcommand(
        "warren_cron.cli.failed",
        "list, show, replay, purge failed tasks",
        "warren_cron.cli.failed_args",
    ),
    "queues": Subcommand(
        "warren_cron.cli.queues",
        "depth and consumers of every queue",
        "warren_cron.cli.queues_args",
    ),
    "doctor": Subcommand(
        "warren_cron.cli.doctor",
        "check the broker for what warren needs",
        "warren_cron.cli.doctor_args",
    ),
    "namespace": Subcommand(
        "warren_cron.cli.namespace",
        "delete a namespace: every queue, stream and exchange",
        "warren_cron.cli.namespace_args",
    ),
    "history": Subcommand(
        "warren_cron.cli.history",
        "runs and their attempts, from history",
        "warren_cron.cli.history_args",
    ),
    "runs": Subcommand(
        "warren_cron.cli.runs",
        "one run's state and result; wait for or cancel it",
        "warren_cron.cli.runs_args",
    ),
    "status": Subcommand(
        "warren_cron.cli.status",
        "each schedule's last run and next fire",
        "warren_cron.cli.status_args",
    ),
    "schedules": Subcommand(
        "warren_cron.cli.schedules",
        "list, create, update, archive, pause, trigger...",
        "warren_cron.cli.schedules_args",
    ),
}


def package_version() -> str:
    """The installed distribution's version ("unknown" when run from an uninstalled tree)."""
    # Imported here: importlib.metadata alone is a fifth of a bare ``warren --help``.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


def usage() -> str:
    """``warren --help``: every subcommand with its one line."""
    width = max(map(len, SUBCOMMANDS))
    lines = [f"  {name:<{width}}  {sub.summary}" for name, sub in SUBCOMMANDS.items()]
    return (
        "usage: warren [--version] [--help] COMMAND [ARGS...]\n\n"
        "Cron jobs on RabbitMQ with dead-letter retries.\n\ncommands:\n"
        + "\n".join(lines)
        + "\n\n'warren COMMAND --help' explains a command. Configure with CRON_* variables."
    )


def options(argv: Sequence[str]) -> list[str]:
    """The arguments given before a ``--``."""
    words = list(argv)
    return words[: words.index("--")] if "--" in words else words


def asks_version(argv: Sequence[str]) -> bool:
    """``--version`` among the arguments given before a ``--``."""
    return "--version" in options(argv)


def asks_help(argv: Sequence[str]) -> bool:
    """``-h`` or ``--help`` among the arguments given before a ``--``."""
    return not {"-h", "--help"}.isdisjoint(options(argv))


def explain(sub: Subcommand, argv: list[str]) -> None:
    """Parse ``argv`` with the subcommand's light command line: argparse prints the help (or
    a usage error) and exits, with none of the subcommand's own modules loaded."""
    if sub.parser and asks_help(argv):
        module, _, function = sub.parser.partition(":")
        parse = getattr(importlib.import_module(module), function or "parse_args")
        cast(Callable[[list[str]], object], parse)(argv)


def run(name: str, argv: Sequence[str]) -> int:
    """Run subcommand ``name`` with ``argv``; its exit code (0 when a reader such as ``head``
    closed the output pipe early, as for any Unix filter)."""
    sub = SUBCOMMANDS[name]

    def command() -> int:
        explain(sub, list(argv))
        entry = cast(Callable[[list[str]], int], importlib.import_module(sub.module).main)
        return entry(list(argv))

    return quiet_on_closed_pipe(command)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``warren`` console script; returns the exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print(usage(), file=sys.stderr)
        return EXIT_USAGE
    if args[0] in {"-h", "--help", "help"}:
        print(usage())
        return EXIT_OK
    name, rest = args[0], args[1:]
    if name == "--version" or (name in SUBCOMMANDS and asks_version(rest)):
        print(f"warren {package_version()}")
        return EXIT_OK
    if name not in SUBCOMMANDS:
        print(f"warren: no command {name!r}; one of: {', '.join(SUBCOMMANDS)}", file=sys.stderr)
        return EXIT_USAGE
    return run(name, rest)
