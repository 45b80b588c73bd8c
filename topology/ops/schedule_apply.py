"""Apply a file of schedules to the store: its difference first, then the changes.

``warren schedules apply`` calls these; the steps are decided by ``topology/store/apply.py``
and written one at a time by the store's ``ScheduleAdmin``, each attributed to ``by``.
"""

from __future__ import annotations

from dataclasses import dataclass

from warren_cron.errors import StoreError
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.admin import ScheduleAdmin
from warren_cron.store.apply import Options, Plan, plan_apply


@dataclass(frozen=True, slots=True)
class Applied:
    """A plan written whole: how many changes, how many schedules were the same."""

    written: int
    unchanged: int


class ApplyCut(StoreError):
    """Another writer came between the plan and one of its changes: what was written stays,
    and applying again finishes it."""

    def __init__(self, error: StoreError, written: int, total: int) -> None:
        super().__init__(str(error))
        self.error = error
        self.written = written
        self.total = total


async def planned_apply(admin: ScheduleAdmin, specs: list[ScheduleSpec], options: Options) -> Plan:
    """The steps that make the store hold ``specs``, against the store read now."""
    return await plan_apply(specs, await admin.entries(), options)


async def apply_plan(
    admin: ScheduleAdmin, plan: Plan, manager: str, by: str, reason: str
) -> Applied:
    """Write each change of ``plan`` (one without conflicts) as ``manager``'s; ``ApplyCut``
    when a change is refused part-way."""
    changes = plan.changes()
    for done, step in enumerate(changes):
        try:
            await admin.apply_step(step, manager, by, reason)
        except StoreError as error:
            raise ApplyCut(error, done, len(changes)) from error
    return Applied(len(changes), len(plan.steps) - len(changes))
