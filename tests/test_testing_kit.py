"""The testing kit without a broker: a task run as a worker would, on a virtual clock."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from tests.kit_handlers import Flaky, Report, Sent, send_report
from tests.webhook import Endpoint, serve
from warren_cron import TaskContext
from warren_cron.errors import EnqueueError
from warren_cron.testing import Kit, run_task
from warren_cron.worker.registry import Registry
from warren_cron.worker.settings import WorkerSettings


async def test_a_typed_task_runs_with_its_model_and_returns_its_result() -> None:
    """The handler gets the payload as its model, and the run's result is the model's JSON,
    as ``result()`` on a real client would read it."""
    run = await run_task(send_report, Report(customer=42))
    assert (run.state, run.reason) == ("succeeded", "succeeded")
    assert run.result == {"customer": 42, "pages": 3}
    assert send_report.result_of(run.result) == Sent(customer=42, pages=3)


async def test_the_context_has_the_attempt_and_run_id_and_the_logs_are_dicts() -> None:
    """``TaskContext`` as a worker gives it; each log line a dict with the bound run id."""
    run = await run_task(send_report, Report(customer=7), key="report:7")
    assert run.run_id == "key:report:7"
    (line,) = [log for log in run.logs if log["event"] == "sending"]
    assert line["customer"] == 7
    assert (line["run_id"], line["attempt"], line["task"]) == ("key:report:7", 1, "kit-report")


async def test_a_six_step_plan_over_hours_runs_at_once_on_the_virtual_clock() -> None:
    """Six retries 1m..32m apart run without waiting, each at its delay, the seventh
    attempt succeeding."""
    plan = "1m-2m-4m-8m-16m-32m"
    loop = asyncio.get_running_loop()
    started = loop.time()
    run = await run_task("kit-flaky", {"failures": 6}, plan=plan)
    assert loop.time() - started < 5
    assert (run.state, run.result, len(run.attempts)) == ("succeeded", 7, 7)
    assert run.delays == [60, 120, 240, 480, 960, 1920]
    assert [a.action for a in run.attempts] == ["retrying"] * 6 + ["succeeded"]


async def test_a_plan_spent_fails_the_run_as_retries_exhausted() -> None:
    """Retryable failures past the plan end the run ``failed`` with ``retries-exhausted``."""
    run = await run_task("kit-flaky", Flaky(failures=5).__dict__, plan="1h-2h")
    assert (run.state, run.reason, len(run.attempts)) == ("failed", "retries-exhausted", 3)
    assert run.error == "RetryableError: attempt 3 fails"


async def test_a_permanent_error_fails_at_once() -> None:
    """``PermanentError`` spends no retry."""
    run = await run_task("kit-greet", {"name": ""}, plan="1m-2m")
    assert (run.state, run.reason, len(run.attempts)) == ("failed", "permanent-error", 1)


async def test_a_retry_past_the_ttl_expires_the_run() -> None:
    """A retry that would start after the task's deadline (judged on the virtual clock) ends
    the run ``expired`` instead."""
    run = await run_task("kit-flaky", {"failures": 9}, plan="10m-1h", ttl=timedelta(minutes=30))
    assert (run.state, run.reason) == ("failed", "expired")
    assert len(run.attempts) == 2


async def test_a_cancelled_run_ends_cancelled_without_its_next_attempt() -> None:
    """``cancel_at=2``: the run is cancelled before its second attempt, and ends so."""
    run = await run_task("kit-flaky", {"failures": 3}, plan="1m-1m-1m", cancel_at=2)
    assert (run.state, [a.action for a in run.attempts]) == (
        "cancelled",
        ["retrying", "cancelled"],
    )


async def test_a_payload_of_the_wrong_type_fails_permanent_at_the_worker() -> None:
    """Sent by name, past the handle's check: the worker's check fails it ``invalid-payload``
    with the field's problem and no retry."""
    run = await run_task("kit-report", {"customer": "forty-two"}, plan="1m-2m")
    assert (run.state, run.reason, len(run.attempts)) == ("failed", "invalid-payload", 1)
    assert run.error is not None and "customer" in run.error and "forty-two" not in run.error


async def test_a_payload_of_the_wrong_type_is_refused_by_the_handle() -> None:
    """Through the handle, the payload is checked as ``enqueue`` checks it."""
    with pytest.raises(EnqueueError, match=r"kit-report.*customer: Field required"):
        await run_task(send_report, {"period": "weekly"})


async def test_an_unknown_task_fails_naming_the_known_ones() -> None:
    """A name no handler has fails ``unknown-task`` listing the registered names."""
    run = await run_task("kit-no-such-task")
    assert (run.state, run.reason) == ("failed", "unknown-task")
    assert run.error is not None and "kit-report" in run.error


async def test_the_http_task_runs_against_a_local_server() -> None:
    """The built-in http task calls a real local endpoint; a 503 then a 200 is one retry."""
    settings = WorkerSettings(http_allow=["127.0.0.1"])
    with serve(Endpoint(statuses=[503, 200])) as endpoint:
        async with Kit(settings) as kit:
            run = await kit.run("http", {"url": f"{endpoint.url}/hook"}, plan="30s")
    assert (run.state, run.result, run.delays) == ("succeeded", {"status": 200}, [30])
    assert [path for path, _, _ in endpoint.requests] == ["/hook", "/hook"]


async def test_a_kit_runs_a_registry_of_its_own() -> None:
    """``Kit(registry=...)``: only the handlers of that registry."""
    mine = Registry()

    @mine.task("kit-own")
    async def own(payload: Any, ctx: TaskContext) -> Any:
        return payload

    async with Kit(registry=mine) as kit:
        run = await kit.run("kit-own", [1, 2])
        unknown = await kit.run("kit-report", {"customer": 1})
    assert run.result == [1, 2]
    assert (unknown.reason, unknown.error) == (
        "unknown-task",
        "no handler for task 'kit-report' (known: kit-own); register it and list its module "
        "in CRON_HANDLER_MODULES",
    )
