"""Who may do what, on every surface: the role each action needs, and who reads the pages.

The HTTP API, the dashboard's pages and its forms only ask this module. A token has a role
(viewer, operator or admin); each role may do what the roles before it may. With any token
configured, reading needs a viewer's token on the API and on the pages alike, unless the
pages are opened to anonymous readers (viewer rights, never more). With no token at all the
pages are read by anyone and no action is possible: the dashboard is read-only.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class Access:
    """The policy of one monitor: whether any token is configured, and whether its pages
    are open to anonymous readers (``CRON_DASHBOARD_ANONYMOUS_READ``)."""

    tokens: bool
    anonymous_read: bool = False

    def pages_role(self, role: Role | None) -> Role | None:
        """The role a reader of the pages has: a token's, or viewer for anyone when no
        token is configured or anonymous reading is on; None: they must log in."""
        if role is not None:
            return role
        return "viewer" if not self.tokens or self.anonymous_read else None

    def may_read_pages(self, role: Role | None) -> bool:
        """Whether a reader with ``role`` (None: no token given) may read the pages."""
        return self.pages_role(role) is not None

    def may(self, role: Role | None, action: Action) -> bool:
        """Whether a caller with ``role`` (None: no token given) may do ``action``; an
        action that changes anything always needs a token, whatever reading allows."""
        if action == "read":
            return self.may_read_pages(role)
        return role is not None and self.tokens and includes(role, needs(action))
