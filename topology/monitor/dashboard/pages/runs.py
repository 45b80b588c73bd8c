"""``/runs``: the newest runs the dashboard keeps (see ``recent.py``), as ``warren history`` lists
them; ``/runs/<id>``: one run's story."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from aiohttp import web

from warren_cron.errors import CancelError
from warren_cron.failed.select import RecordFilter, exact
from warren_cron.history.reader import Budget
from warren_cron.history.run_fold import ENDED, OUTCOMES, Run
from warren_cron.history.timeline import seconds_text, steps
from warren_cron.monitor.console.recent import NOTABLE, PER_SCHEDULE
from warren_cron.monitor.dashboard.pages.common import act
from warren_cron.monitor.web.auth import Actor
from warren_cron.monitor.web.dashboard import dashboard_of
from warren_cron.ops.runs import Read, RunFilter, kept_runs, shown_run
from warren_cron.ops.runs_cancel import ChannelAccess
from warren_cron.ops.runs_cancel import cancel as cancel_one
from warren_cron.ops.scans import ScanRefused

#: Runs listed at most.
LIMIT = 100
#: A run read from the stream (None: no event of it), and the read's budget.
Scanned = tuple[Run | None, Budget]


async def runs_page(request: web.Request) -> web.StreamResponse:
    """The newest runs of the last day, filtered by schedule pattern and outcome."""
    dashboard = dashboard_of(request)
    pattern = request.query.get("schedule", "").strip()
    outcome = request.query.get("outcome", "")
    which = RunFilter(schedule=pattern or None, outcome=outcome or None)
    runs = kept_runs(dashboard.recent, which, LIMIT)
    return dashboard.page(
        request,
        "runs.html",
        runs=runs,
        schedule=pattern,
        outcome=outcome,
        outcomes=OUTCOMES,
        limit=LIMIT,
        took=seconds_text,
        per_schedule=PER_SCHEDULE,
        notable=NOTABLE,
    )


async def run_page(request: web.Request) -> web.StreamResponse:
    """Every event of one run as a timeline, and its failed record if it has one."""
    dashboard = dashboard_of(request)
    run_id = request.match_info["run_id"]
    run, budget = await shown_run(dashboard, run_id, lambda read: _scanned(request, read))
    records = dashboard.failed.select(RecordFilter(run_id=exact(run_id)))
    status = 200 if run is not None or records else 404
    return dashboard.page(
        request,
        "run.html",
        status=status,
        run_id=run_id,
        run=run,
        steps=[] if run is None else steps(run),
        records=records,
        took=seconds_text,
        ended=ENDED,
        back=f"/runs/{quote(run_id, safe='')}",
        truncated=budget is not None and budget.cut,
        scanned=0 if budget is None else budget.scanned,
    )


async def _scanned(request: web.Request, read: Read) -> Scanned:
    """The run's story read from the stream within the monitor's bound; 429 or 503 when the
    read is refused."""
    try:
        return await dashboard_of(request).scans.scan(request, read)
    except ScanRefused as refused:
        page = web.HTTPTooManyRequests if refused.busy else web.HTTPServiceUnavailable
        headers = {"Retry-After": str(refused.retry_after)}
        raise page(text=refused.message, headers=headers) from None


async def cancel(request: web.Request) -> web.StreamResponse:
    """Cancel the run (``topology/cancel/``), with the reason given."""
    dashboard = dashboard_of(request)
    run_id = request.match_info["run_id"]

    async def perform(actor: Actor, form: Mapping[str, str], reason: str) -> str:
        try:
            async with ChannelAccess(dashboard.connection, dashboard.names) as access:
                answer = await cancel_one(access, run_id, reason, actor.by)
        except CancelError as error:
            return f"not cancelled: {error}"
        return answer.message

    return await act(request, "cancel", perform, f"/runs/{quote(run_id, safe='')}")


def add_routes(app: web.Application) -> None:
    """``/runs``, ``/runs/<run id>`` and its cancel action."""
    app.router.add_get("/runs", runs_page)
    app.router.add_post("/runs/{run_id:.+}/cancel", cancel)
    app.router.add_get("/runs/{run_id:.+}", run_page)
