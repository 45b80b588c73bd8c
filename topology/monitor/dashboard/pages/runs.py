"""``/runs``: the newest runs the dashboard keeps (see ``recent.py``), as ``warren history`` lists
them; ``/runs/<id>``: one run's story."""

from __future__ import annotations

from fnmatch import fnmatchcase

from aiohttp import web

from warren_cron.failed.select import RecordFilter, exact
from warren_cron.history.recent import one_run, story_start
from warren_cron.history.runs import OUTCOMES, Run
from warren_cron.history.timeline import seconds_text, steps
from warren_cron.monitor.dashboard.pages.common import dashboard_of
from warren_cron.monitor.dashboard.recent import NOTABLE, PER_SCHEDULE

#: Runs listed at most.
LIMIT = 100


async def runs_page(request: web.Request) -> web.StreamResponse:
    """The newest runs of the last day, filtered by schedule pattern and outcome."""
    dashboard = dashboard_of(request)
    pattern = request.query.get("schedule", "").strip()
    outcome = request.query.get("outcome", "")

    def want(run: Run) -> bool:
        named = not pattern or fnmatchcase(run.schedule or "", pattern)
        return named and outcome in ("", run.outcome)

    runs = dashboard.recent.newest(want, LIMIT)
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
    run = dashboard.recent.whole(run_id)
    if run is None:  # not kept, or kept without its start: its story from the stream
        start = story_start(run_id, None, dashboard.offsets.offset_at)
        run = await one_run(dashboard.connection, dashboard.names.history_stream, run_id, start)
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
    )


def add_routes(app: web.Application) -> None:
    """``/runs`` and ``/runs/<run id>``."""
    app.router.add_get("/runs", runs_page)
    app.router.add_get("/runs/{run_id:.+}", run_page)
