"""The dashboard as its pages and API endpoints see it: the monitor's state, who sends each
request (``auth.py``), and the pages' templates (``render.py``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import web

from warren_cron.monitor.console.dashboard_state import DashboardState
from warren_cron.monitor.scheduler_down import SchedulerWatch
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.monitor.status_keeper import StatusKeeper
from warren_cron.monitor.web.auth import Auth, Refused
from warren_cron.monitor.web.render import Notes, environment, render
from warren_cron.monitor.web.throttle import LoginThrottle
from warren_cron.schedules.schedule import Schedule


class WebDashboard(DashboardState):
    """The monitor's state with the login and the templates each request is answered with."""

    def __init__(
        self,
        settings: MonitorSettings,
        schedules: Sequence[Schedule],
        keeper: StatusKeeper,
        plan_keys: Callable[[], set[str]],
        schedulers: SchedulerWatch | None = None,
    ) -> None:
        super().__init__(settings, schedules, keeper, plan_keys, schedulers)
        token = settings.dashboard_token
        throttle = LoginThrottle(
            settings.dashboard_login_failures, settings.dashboard_lockout_seconds
        )
        secret = None if token is None else token.get_secret_value()
        self.auth = Auth(
            secret,
            throttle,
            self.api.match if self.api.tokens else None,
            anonymous_read=settings.dashboard_anonymous_read,
            session_seconds=settings.dashboard_session_seconds,
        )
        self.notes = Notes()
        self.env = environment()

    def page(
        self, request: web.Request, name: str, status: int = 200, **context: Any
    ) -> web.Response:
        """Render template ``name`` for ``request``."""
        return render(request, self.env, self.auth, self.notes, name, status, **context)

    def refusal(
        self, request: web.Request, name: str, refused: Refused, **context: Any
    ) -> web.Response:
        """Render template ``name`` for a refusal, with its status and headers (``Retry-After``)."""
        page = self.page(request, name, refused.status, **context)
        page.headers.update(refused.headers)
        return page


#: Where a request finds the dashboard it is served by.
DASHBOARD: web.AppKey[WebDashboard] = web.AppKey("dashboard")


def dashboard_of(request: web.Request) -> WebDashboard:
    """The dashboard this request is served by."""
    return request.app[DASHBOARD]
