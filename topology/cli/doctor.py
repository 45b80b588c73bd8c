"""``warren doctor``: what matters for warren on this broker, each finding with what to do.

Over AMQP alone: the server's version and support, Khepri or Mnesia where the version tells
(before 3.13, and from 4.3), each queue of CRON_NAMESPACE against the arguments warren declares
(a mismatch that makes declares fail with PRECONDITION_FAILED), the delivery limit warren sets,
the timeouts of CRON_*, the delayed-message plugin, queues holding messages with no consumer,
and the failed queue growing. With ``--management-url``, also: the khepri_db feature flag on
3.13 to 4.2, the number of nodes, and policies lowering the delivery limit or the consumer
timeout. Exit code: 0 fine, 1 warnings, 2 problems (or bad usage), 3 broker unreachable.
The survey and its findings are ``warren_cron.ops.doctor``'s; this module parses and prints.
"""

from __future__ import annotations

import argparse
import sys

import orjson

from warren_cron.cli.common import EXIT_USAGE, aligned, run_command
from warren_cron.cli.doctor_args import parse_args
from warren_cron.errors import SettingsError
from warren_cron.ops.doctor import Diagnosis, diagnose
from warren_cron.ops.doctor_findings import LEVELS, Finding
from warren_cron.ops.doctor_survey import Timeouts
from warren_cron.runtime.settings import CronSettings, load_settings, redact_urls

EXIT_FOR = {"ok": 0, "info": 0, "warning": 1, "problem": 2}


def worker_timeouts() -> Timeouts:
    """CRON_TASK_TIMEOUT_SECONDS and CRON_CONSUMER_TIMEOUT_SECONDS as a worker reads them."""
    from warren_cron.worker.settings import WorkerSettings

    fields = WorkerSettings.model_fields
    defaults = Timeouts(
        fields["task_timeout_seconds"].default, fields["consumer_timeout_seconds"].default
    )
    try:
        worker = load_settings(WorkerSettings)
    except SettingsError as error:
        return Timeouts(defaults.task_seconds, defaults.consumer_seconds, str(error))
    return Timeouts(worker.task_timeout_seconds, worker.consumer_timeout_seconds)


def text(findings: list[Finding]) -> str:
    """Findings as a table, worst first, then what to do for each that needs something."""
    ranked = sorted(findings, key=lambda f: -LEVELS.index(f.level))
    table = aligned(
        [("LEVEL", "CHECK", "FINDING")] + [(f.level, f.check, f.summary) for f in ranked]
    )
    todo = [f"- {f.check}: {f.action}" for f in ranked if f.level in {"warning", "problem"}]
    return table + ("\n\nwhat to do:\n" + "\n".join(todo) if todo else "")


def as_json(diagnosis: Diagnosis) -> str:
    """The report as one JSON object."""
    return orjson.dumps(diagnosis.to_json(), option=orjson.OPT_INDENT_2).decode()


async def report(args: argparse.Namespace, settings: CronSettings) -> int:
    """Diagnose the broker, print the findings; the exit code of the worst."""
    diagnosis = await diagnose(settings, worker_timeouts(), args.watch, args.management_url)
    print(as_json(diagnosis) if args.json else redact_urls(text(diagnosis.findings)))
    return EXIT_FOR[diagnosis.status]


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    try:
        settings = load_settings(CronSettings)
    except SettingsError as error:
        print(f"warren doctor: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.watch < 0:
        print("warren doctor: error: --watch takes seconds, 0 or more", file=sys.stderr)
        return EXIT_USAGE
    return run_command("warren doctor", report(args, settings)) or 0


if __name__ == "__main__":
    sys.exit(main())
