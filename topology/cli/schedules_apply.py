"""``warren schedules apply FILE [--dry-run] [--prune] [--force]``: a schedules file into
the store, as the declarative source of the schedules it names.

Prints one line per schedule (``create``, ``change`` with the fields that differ,
``adopt`` a runtime schedule the file now names, ``same``, ``archive`` with ``--prune``),
then writes the changes, attributed to ``user@host`` with the reason ``apply FILE``. Exit
codes, as ``kubectl diff``'s for ``--dry-run``: 0 nothing to change (or applied), 1 a dry
run found changes, 2 the file or a conflict refused it (nothing written), 3 broker trouble.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from warren_cron.cli.common import EXIT_OK, EXIT_PARTIAL, EXIT_USAGE, UsageError
from warren_cron.cli.schedules_store import opened
from warren_cron.errors import ScheduleError
from warren_cron.history.events import who
from warren_cron.ops.schedule_apply import ApplyCut, apply_plan, planned_apply
from warren_cron.schedules.load import load_schedules
from warren_cron.store.admin import ScheduleAdmin
from warren_cron.store.apply import Options, Plan, Step

if TYPE_CHECKING:
    from warren_cron.cli.schedules import Context


def options(context: Context, args: argparse.Namespace) -> Options:
    """The apply's options from the command line and the deployment's own file."""
    manager = args.manager or Path(args.file).name
    file_names = frozenset(s.name for s in context.schedules.schedules)
    return Options(manager, file_names, prune=args.prune, force=args.force)


def render(step: Step) -> list[str]:
    """One step as lines: the action and name, then each field that differs."""
    return [f"{step.action:<8}{step.name}", *(f"          {line}" for line in step.diff)]


async def cmd_apply(context: Context, args: argparse.Namespace) -> int:
    """Show FILE's difference against the store and, unless a dry run, apply it."""
    try:
        specs = [s.spec for s in load_schedules(Path(args.file), context.settings).schedules]
    except ScheduleError as error:
        raise UsageError(f"{error}; nothing applied") from None
    chosen = options(context, args)
    async with opened(context) as admin:
        plan = await planned_apply(admin, specs, chosen)
        _show(plan)
        if plan.conflicts:
            return EXIT_USAGE
        if args.dry_run:
            return EXIT_PARTIAL if plan.changes() else EXIT_OK
        return await _write(admin, plan, chosen.manager, f"apply {args.file}")


def _show(plan: Plan) -> None:
    for step in plan.steps:
        print("\n".join(render(step)))
    for conflict in plan.conflicts:
        print(f"warren schedules: conflict: {conflict}", file=sys.stderr)
    if plan.conflicts:
        print("warren schedules: nothing applied", file=sys.stderr)


async def _write(admin: ScheduleAdmin, plan: Plan, manager: str, reason: str) -> int:
    try:
        applied = await apply_plan(admin, plan, manager, who(), reason)
    except ApplyCut as cut:
        # Another writer between the plan and this change: what was written stays.
        print(
            f"warren schedules: error: {cut.error}; {cut.written} of {cut.total} changes "
            "applied: run apply again",
            file=sys.stderr,
        )
        return EXIT_USAGE
    print(f"applied {applied.written} change(s); {applied.unchanged} schedule(s) unchanged")
    return EXIT_OK
