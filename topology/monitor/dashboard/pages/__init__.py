"""The dashboard's pages, one module each, and the routes they add (``monitor/mount.py``
mounts them beside the API's)."""

from __future__ import annotations

from warren_cron.monitor.dashboard.pages import (
    failed,
    flow,
    login,
    overview,
    runs,
    schedule_forms,
    schedules,
)
from warren_cron.monitor.web.app import Routes

ROUTES: list[Routes] = [
    overview.add_routes,
    schedules.add_routes,
    schedule_forms.add_routes,
    schedules.add_page_route,
    runs.add_routes,
    failed.add_routes,
    flow.add_routes,
    login.add_routes,
]

__all__ = ["ROUTES"]
