"""``warren schedules backfill NAME --from T1 --to T2 [--dry-run] [--rate N]``.

Publishes the fires of a past range of a schedule of the file or of the store, with the
run ids those fires would have had; one the history holds as published is not sent again
(``topology/schedules/backfill.py``). Prints one line per fire: ``send`` or ``skip`` (sent
before). Exit codes: 0 done, 2 a bad range or unknown schedule, 3 broker trouble, 1 a run
of a Forbid or Replace schedule did not end within ``--run-timeout``.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import TYPE_CHECKING

from warren_cron.cli.common import EXIT_OK, EXIT_PARTIAL, UsageError
from warren_cron.cli.schedules_store import started
from warren_cron.clock import utcnow
from warren_cron.errors import StoreError
from warren_cron.history.events import who
from warren_cron.ops.schedule_backfill import (
    BackfillPlan,
    BackfillRefused,
    plan_backfill,
    runtime_target,
    send_backfill,
)
from warren_cron.schedules.schedule import Schedule

if TYPE_CHECKING:
    from aio_pika.abc import AbstractConnection

    from warren_cron.cli.schedules import Context


def checked_range(args: argparse.Namespace) -> tuple[datetime, datetime]:
    """``--from`` and ``--to``, a past range in order, or a usage error saying why."""
    if args.end < args.start:
        raise UsageError("--to is before --from")
    if args.end > utcnow():
        raise UsageError("--to is in the future: backfill publishes past fires only")
    if not 0 < args.rate <= 1000:
        raise UsageError("--rate: give fires per second between 0 and 1000")
    return args.start, args.end


async def schedule_of(context: Context, connection: AbstractConnection, name: str) -> Schedule:
    """Schedule ``name`` of the file, else of the store (not archived)."""
    found = context.schedules.get(name)
    if found is not None:
        return found
    try:
        return await runtime_target(
            name, await started(context.settings, connection), context.settings
        )
    except (BackfillRefused, StoreError) as error:  # the store unread: say so, exit 2
        raise UsageError(str(error)) from None


async def cmd_backfill(context: Context, args: argparse.Namespace) -> int:
    """Publish the range's fires that the history does not hold as published."""
    start, end = checked_range(args)
    async with context.broker() as (connection, history):
        schedule = await schedule_of(context, connection, args.name)
        plan = await _listed(context, connection, schedule, start, end)
        if args.dry_run or not plan.todo:
            print(f"{len(plan.todo)} of {len(plan.fires)} fire(s) to send")
            return EXIT_OK
        try:
            sent = await send_backfill(
                connection,
                context.settings,
                plan,
                history,
                who(),
                rate=args.rate,
                run_timeout=args.run_timeout,
            )
        except TimeoutError as error:
            print(f"warren schedules: error: {error}", file=sys.stderr)
            return EXIT_PARTIAL
    print(f"sent {sent} of {len(plan.fires)} fire(s)")
    return EXIT_OK


async def _listed(
    context: Context,
    connection: AbstractConnection,
    schedule: Schedule,
    start: datetime,
    end: datetime,
) -> BackfillPlan:
    """The range's fires and those to send, each printed as ``send`` or ``skip``."""
    try:
        plan = await plan_backfill(connection, context.names, schedule, start, end)
    except BackfillRefused as error:
        raise UsageError(str(error)) from None
    for fire in plan.fires:
        print(f"{'skip' if plan.was_sent(fire) else 'send'}  {schedule.run_id(fire)}")
    return plan
