"""The "it stopped running" alert: no successful run within a schedule's
``expect_success_within``.

No failed-queue alert catches a job that no longer runs at all (its scheduler gone, its
worker never consuming, its fires skipped). The monitor counts from the schedule's last
success, else from when it first watched the schedule, or from its last resume if later; a
paused or disabled schedule is not expected to succeed. The alert goes out as a condition
``no-success:<schedule>``, grouped and rate limited with the others, and clears with
RESOLVED when a run succeeds. Whether it fires is kept in the stored fold, so a restarted
monitor neither repeats the alert nor forgets to resolve it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from warren_cron.clock import utc_text
from warren_cron.history.status_fold import ScheduleState
from warren_cron.monitor.alerts import Condition
from warren_cron.monitor.status_keeper import StatusKeeper
from warren_cron.schedules.schedule import Schedule


class SuccessWatch:
    """Checks each schedule that sets ``expect_success_within``; returns what changed."""

    def __init__(self, schedules: Sequence[Schedule], keeper: StatusKeeper) -> None:
        self.schedules = [s for s in schedules if s.spec.expect_success_seconds is not None]
        self.keeper = keeper

    def check(self, now: datetime) -> list[Condition]:
        """The conditions that changed; none until the history held at start is folded."""
        if not self.keeper.caught_up:
            return []
        changes = [self._check(schedule, now) for schedule in self.schedules]
        return [change for change in changes if change is not None]

    def _check(self, schedule: Schedule, now: datetime) -> Condition | None:
        state = self.keeper.fold.state(schedule.name)
        if state.watched_since is None:
            state.watched_since = now
            self.keeper.changed = True
        since = self._since(schedule.name, state)
        window = schedule.spec.expect_success_seconds or 0.0
        expected = schedule.spec.enabled and schedule.name not in self.keeper.pauses
        silent = expected and (now - since).total_seconds() > window
        if silent == state.silent:
            return None
        state.silent = silent
        self.keeper.changed = True
        detail = _detail(schedule, state, expected)
        return Condition(f"no-success:{schedule.name}", silent, detail)

    def _since(self, name: str, state: ScheduleState) -> datetime:
        moments = (state.last_success_at, state.watched_since, self.keeper.resumed.get(name))
        return max(moment for moment in moments if moment is not None)


def _detail(schedule: Schedule, state: ScheduleState, expected: bool) -> str:
    name, within = schedule.name, schedule.spec.expect_success_within
    last = utc_text(state.last_success_at) if state.last_success_at else "never"
    if state.silent:
        return (
            f"schedule {name} has had no successful run within {within} (last success: "
            f"{last}); see warren status"
        )
    if not expected:
        return f"schedule {name} is paused or disabled: no success expected"
    return f"schedule {name} succeeded within {within} again (last success: {last})"
