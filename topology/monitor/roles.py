"""The role table, as the monitor's modules name it: it lives in ``warren_cron.ops.access``,
with the policy that says who reads the pages, so that one place decides on every surface."""

from __future__ import annotations

from warren_cron.ops.access import NEEDS, RANKS, Action, Role, includes, needs

__all__ = ["NEEDS", "RANKS", "Action", "Role", "includes", "needs"]
