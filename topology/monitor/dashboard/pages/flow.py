"""``/flow``: flow control as the history tells it: circuits per destination, limit waits
per key, retries refused by a spent budget."""

from __future__ import annotations

from aiohttp import web

from warren_cron.clock import utcnow
from warren_cron.monitor.console.flow import BUDGET_EXHAUSTED, CIRCUIT_OPEN
from warren_cron.monitor.web.dashboard import dashboard_of

#: Reasons of the limit waits, in the page's column order.
WAITS = ("concurrency-limit", "rate-limit")


async def flow(request: web.Request) -> web.StreamResponse:
    """Keys flow control held back in the last day."""
    dashboard, now = dashboard_of(request), utcnow()
    rows = dashboard.flow.rows(now)
    return dashboard.page(
        request,
        "flow.html",
        rows=rows,
        waits=WAITS,
        circuit_open=CIRCUIT_OPEN,
        budget_reason=BUDGET_EXHAUSTED,
    )


def add_routes(app: web.Application) -> None:
    """``/flow``."""
    app.router.add_get("/flow", flow)
