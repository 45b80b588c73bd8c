"""The long-running processes' command lines: ``--check`` and a description, the rest is
CRON_* variables.

Apart from ``service`` (structlog, tracing) and from the processes' own packages, so that
``warren worker --help``, ``warren scheduler --help`` and ``warren monitor --help`` answer
without loading any of them.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def process_parser(prog: str, description: str, check: str) -> argparse.ArgumentParser:
    """A process's command line: ``--check`` (its ``check`` help), the rest is CRON_* variables."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=f"{description} Configure with CRON_* environment variables "
        "(see .env.example).",
    )
    parser.add_argument("--check", action="store_true", help=check)
    return parser


def worker_args(argv: list[str] | None) -> argparse.Namespace:
    """``warren worker``'s command line."""
    return process_parser(
        "warren worker",
        "Consume due tasks from RabbitMQ, run them, retry failures through dead-letter queues.",
        check="validate settings and import handler modules, then exit",
    ).parse_args(argv)


def monitor_args(argv: list[str] | None) -> argparse.Namespace:
    """``warren monitor``'s command line."""
    return process_parser(
        "warren monitor",
        "Log one line and alert (CRON_ALERT_*: a webhook, Slack, PagerDuty, Opsgenie, signed "
        "events) per failed task, grouped and rate limited; alert on a deep failed queue, on "
        "stalled retry queues, on schedules with no success within their "
        "expect_success_within and when no scheduler leads; keep the status fold of the history.",
        check="validate settings, then exit",
    ).parse_args(argv)


def scheduler_args(argv: list[str] | None) -> argparse.Namespace:
    """``warren scheduler``'s command line."""
    parser = process_parser(
        "warren scheduler",
        "Publish each schedule's due fires to RabbitMQ. Several may run: one leads, the "
        "others stand by. SIGHUP reloads the schedules file; without one, only the runtime "
        "schedules of the broker's store run.",
        check="validate settings and the schedules file, print each schedule's next fires and "
        "retry timeline, then exit (0 valid, 2 invalid)",
    )
    parser.add_argument(
        "--schedules", type=Path, help="schedules file (default: CRON_SCHEDULES_FILE)"
    )
    return parser.parse_args(argv)
