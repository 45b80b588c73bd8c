"""The dashboard's one web application: the pages and the HTTP API on one route table, behind
the pages' login guard, served on CRON_DASHBOARD_PORT."""

from __future__ import annotations

import ipaddress

import structlog
from aio_pika.abc import AbstractRobustConnection
from aiohttp import web

from warren_cron.monitor.api import serve as api
from warren_cron.monitor.dashboard import pages
from warren_cron.monitor.dashboard.pages.login import readers_only
from warren_cron.monitor.web.app import Routes, create_app
from warren_cron.monitor.web.dashboard import DASHBOARD, WebDashboard
from warren_cron.runtime.process import port_taken

log = structlog.get_logger("dashboard")
#: Every route of the dashboard's application: each page's, then the API's.
ROUTES: list[Routes] = [*pages.ROUTES, api.add_routes]


def application(dashboard: WebDashboard) -> web.Application:
    """The pages and the API for ``dashboard``, readers without a login sent to log in."""
    app = create_app(ROUTES, [readers_only])
    app[DASHBOARD] = dashboard
    return app


class Dashboard(WebDashboard):
    """The dashboard of a monitor; ``start`` serves its pages and API on CRON_DASHBOARD_PORT."""

    url: str | None = None
    _runner: web.AppRunner | None = None

    async def start(self, connection: AbstractRobustConnection) -> None:
        """Follow the last day of history, index the failed queue, and serve the pages."""
        await self.start_reading(connection)
        self._runner = web.AppRunner(application(self), access_log=None)
        await self._runner.setup()
        host, port = self.settings.dashboard_host, self.settings.dashboard_port
        try:
            await web.TCPSite(self._runner, host, port).start()
        except OSError as error:
            await self.stop()  # what started before: the readers would die with the loop
            raise port_taken("CRON_DASHBOARD_PORT", f"{host}:{port}", error) from None
        self.url = f"http://{host}:{port}/"
        mode = "open and read-only" if self.auth.read_only else "pages and actions need a token"
        if self.auth.access.anonymous_read:
            mode = "pages open to anyone, actions need a token"
        log.info("dashboard serving", url=self.url, mode=mode)
        if self.auth.read_only and not loopback(host):
            log.warning(
                "dashboard open to the network: no token is set (CRON_API_TOKENS), so anyone "
                "who reaches this address reads every page, failed payloads included",
                url=self.url,
            )

    async def stop(self) -> None:
        """Stop serving and reading; events of actions still buffered are sent."""
        # First: the server waits up to a minute for requests under way (a read, a long poll).
        await self.end_requests()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.stop_reading()


def loopback(host: str) -> bool:
    """Whether ``host`` is reached only from this machine (127.0.0.1, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve to any address
        return False
