"""The dashboard's pages, one module each, and the routes they add."""

from __future__ import annotations

from warren_cron.monitor.api import serve as api
from warren_cron.monitor.dashboard.app import Routes
from warren_cron.monitor.dashboard.pages import (
    failed,
    flow,
    login,
    overview,
    runs,
    schedule_forms,
    schedules,
)
from warren_cron.monitor.dashboard.pages.common import DASHBOARD

ROUTES: list[Routes] = [
    overview.add_routes,
    schedules.add_routes,
    schedule_forms.add_routes,
    schedules.add_page_route,
    runs.add_routes,
    failed.add_routes,
    flow.add_routes,
    login.add_routes,
    api.add_routes,
]

__all__ = ["DASHBOARD", "ROUTES"]
