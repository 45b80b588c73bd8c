"""``/api/v1/runs``: list runs, one run's state and attempts, and enqueue a task.

Runs are read through the operations ``warren history``, ``warren runs``, the run pages and
run handles call (``warren_cron.ops.runs``, ``ops/run_waits.py``); a run's state is
``topology/history/lifecycle.py``'s. An enqueue
goes through the same ``Client`` an application uses and is audited to the history as a
``triggered`` event with the token's name as ``by``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from warren_cron.client.options import EnqueueOptions
from warren_cron.clock import utc_text, utcnow
from warren_cron.errors import BrokerUnavailable, EnqueueError, PlanError
from warren_cron.failed.select import parse_since
from warren_cron.history.events import event
from warren_cron.history.lifecycle import status_of
from warren_cron.history.reader import Budget
from warren_cron.history.run_fold import Run as Folded
from warren_cron.monitor.api.problems import ApiError
from warren_cron.monitor.api.routes import Call, Endpoint
from warren_cron.monitor.api.run_models import (
    EnqueueBody,
    Enqueued,
    Run,
    RunList,
    RunQuery,
    RunRead,
    RunsQuery,
)
from warren_cron.monitor.api.run_scans import LIST_HINT, RUN_HINT, partial, refusal, scanned
from warren_cron.monitor.console.known_tasks import KnownTasksEar
from warren_cron.monitor.console.run_waiters import WaitRefused
from warren_cron.ops.run_waits import Shown, shown_status, waited_status
from warren_cron.ops.runs import Read, RunFilter
from warren_cron.ops.runs import list_runs as runs_since
from warren_cron.ops.scans import ScanRefused

#: The longest run id looked up: longer ones are no run id warren makes.
MAX_RUN_ID = 300
DEFAULT_SINCE = timedelta(days=1)


def since_of(text: str | None, oldest: timedelta) -> datetime:
    """``since`` as a time, never before the history's retention (``oldest`` ago); 400 when it
    is no age or time."""
    now = utcnow()
    try:
        since = now - DEFAULT_SINCE if text is None else parse_since(text, now)
    except (ValueError, OverflowError) as error:
        why = str(error).replace("--since", "since") if isinstance(error, ValueError) else ""
        raise ApiError(400, "invalid", why or f"since {text!r} is too far back") from None
    return max(since, now - oldest)


def as_run(run_id: str, run: Folded | None) -> Run:
    """The API's view of a folded run."""
    return Run.model_validate(status_of(run_id, run, utcnow()).as_json())


async def list_runs(call: Call) -> RunList:
    """The newest runs with events since ``since`` (default a day), by schedule and state."""
    query, dashboard = call.query_as(RunsQuery), call.dashboard
    oldest = timedelta(seconds=dashboard.settings.history_max_age_seconds)
    since = since_of(query.since, oldest)
    which = RunFilter(schedule=query.schedule, state=query.state)
    stream, limit = dashboard.names.history_stream, query.limit

    async def read(budget: Budget) -> list[Folded]:
        return await runs_since(dashboard.connection, stream, which, limit, since, budget)

    runs, budget = await scanned(call, read)
    found = [as_run(run.run_id, run) for run in runs]
    more = len(found) == query.limit
    return RunList(runs=found, since=utc_text(since), more=more, **partial(budget, LIST_HINT))


async def get_run(call: Call) -> RunRead:
    """One run: its state, every attempt, its error or its result; ``wait`` long-polls."""
    run_id, wait = call.request.match_info["run_id"], call.query_as(RunQuery).wait
    if not 0 < len(run_id) <= MAX_RUN_ID or not run_id.isprintable():
        raise ApiError(400, "invalid", f"run_id: 1 to {MAX_RUN_ID} printable characters")
    status, budget = await _shown(call, run_id, wait)
    read = partial(budget, RUN_HINT)
    if status is None:
        why = f"no event of run {run_id!r}: unknown, not run yet, or older than the history"
        if read["truncated"]:
            why = f"no event of run {run_id!r} in the {read['scanned']} events read"
        raise ApiError(404, "not_found", why, **read)
    return RunRead.model_validate({**status.as_json(), **read})


async def _shown(call: Call, run_id: str, wait: float) -> Shown:
    """Where the run stands, now or (``wait``) once it ended; 429 or 503 when its read of the
    stream is refused."""
    dashboard, waiters = call.dashboard, call.dashboard.api.waiters

    async def scan(read: Read) -> tuple[Folded | None, Budget]:
        return await dashboard.scans.scan(call.request, read)

    try:
        if wait <= 0:
            return await shown_status(dashboard, run_id, scan)
        with waiters.watch(run_id) as woken:
            stopping = waiters.is_closed  # asked at each wake: the monitor stops, answer now
            return await waited_status(dashboard, run_id, scan, woken, wait, stopping)
    except ScanRefused as refused:
        raise refusal(refused) from None
    except WaitRefused as refused:
        raise ApiError(refused.status, refused.code, refused.why, headers=refused.headers) from None


async def enqueue_run(call: Call) -> Enqueued:
    """Enqueue one task, now, ``at`` a time or after a ``delay``; audited as ``triggered``."""
    body, dashboard = call.body_as(EnqueueBody), call.dashboard
    if not body.force:
        await refuse_unknown(dashboard.api.known_tasks, body.task)
    try:
        done = await dashboard.api.client.enqueue(body.task, body.payload, **options_of(body))
    except (EnqueueError, PlanError) as error:
        raise ApiError(400, "invalid", str(error)) from None
    except BrokerUnavailable as error:
        raise ApiError(503, "broker_unavailable", str(error)) from None
    if done.created:
        ids: dict[str, Any] = {"run_id": done.run_id, "task": body.task}
        due = None if done.due is None else utc_text(done.due)
        dashboard.history.emit(
            event("triggered", **ids, scheduled_for=due, by=call.by, reason=body.reason)
        )
    due_text = None if done.due is None else utc_text(done.due)
    return Enqueued(run_id=done.run_id, due=due_text, created=done.created)


async def refuse_unknown(ear: KnownTasksEar, task: str) -> None:
    """422 for a task no live worker registered, naming the ones they did."""
    known = ear.known.unknown(task)
    if known is not None:
        # Just started, the monitor may not have heard every worker yet: hear them first.
        await ear.settled()
        known = ear.known.unknown(task)
    if known is not None:
        names = ", ".join(known) or "none: no worker is running"
        raise ApiError(
            422,
            "unknown_task",
            f"no live worker registered task {task!r} (known: {names}); start a worker that "
            "registers it, or send force: true to enqueue it for a worker to come",
        )


def options_of(body: EnqueueBody) -> EnqueueOptions:
    """The enqueue's options the body sets."""
    options = EnqueueOptions()
    if body.delay is not None:
        options["delay"] = body.delay
    if body.at is not None:
        options["at"] = body.at
    if body.ttl is not None:
        options["ttl"] = body.ttl
    if body.key is not None:
        options["key"] = body.key
    return options


RUN = "/runs/{run_id}"
ENDPOINTS = [
    Endpoint("GET", "/runs", list_runs, "read", RunList, query=RunsQuery, errors=(429, 503)),
    Endpoint("GET", RUN, get_run, "read", RunRead, query=RunQuery, errors=(400, 404, 429, 503)),
    Endpoint(
        "POST",
        "/runs",
        enqueue_run,
        "enqueue",
        Enqueued,
        EnqueueBody,
        status=202,
        errors=(422, 503),
    ),
]
