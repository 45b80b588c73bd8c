"""Who may do what: one table from each action to the role it needs, read by the HTTP API
and the dashboard alike, so that an action never needs one role here and another there.
"""

from __future__ import annotations

from typing import Literal

Role = Literal["viewer", "operator", "admin"]
#: Each role may do what the roles before it may.
RANKS: dict[Role, int] = {"viewer": 0, "operator": 1, "admin": 2}

Action = Literal[
    "read",
    "enqueue",
    "cancel",
    "trigger",
    "pause",
    "resume",
    "replay",
    "purge",
    "create",
    "update",
    "archive",
]
#: The role each action needs, on every surface. Purging and changing runtime schedules
#: destroy what cannot be had back, so they need an admin; the rest an operator.
NEEDS: dict[Action, Role] = {
    "read": "viewer",
    "enqueue": "operator",
    "cancel": "operator",
    "trigger": "operator",
    "pause": "operator",
    "resume": "operator",
    "replay": "operator",
    "purge": "admin",
    "create": "admin",
    "update": "admin",
    "archive": "admin",
}


def needs(action: Action) -> Role:
    """The role ``action`` needs."""
    return NEEDS[action]


def includes(role: Role, needed: Role) -> bool:
    """Whether ``role`` may do what ``needed`` may."""
    return RANKS[role] >= RANKS[needed]
