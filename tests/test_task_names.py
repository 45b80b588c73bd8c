"""Task names: one rule at every entry (client, API, command, schedules) and in the worker, so
that every run id an enqueue gives can be looked up, cancelled and shown."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api import Api
from tests.failed_records import run_warren
from tests.namespace import TestBroker
from warren_cron.client import Client, EnqueueError
from warren_cron.errors import ScheduleError
from warren_cron.schedules.load import parse_schedules
from warren_cron.worker.registry import Registry

pytestmark = pytest.mark.broker

HOSTILE = "../../etc/passwd\u0000<script>"
FORM = "1 to 200 printable characters"


async def test_the_api_refuses_a_task_name_with_a_nul_and_names_the_allowed_form(
    api: Api, broker: TestBroker
) -> None:
    """POST /runs with a NUL in the task is a 400 in the API's JSON shape, nothing queued;
    a printable name (angle brackets too) is enqueued and its run id is found by GET."""
    status, error = await api.call("POST", "/runs", "operator", json={"task": HOSTILE})
    assert status == 400 and FORM in error["error"]["message"], error
    assert await broker.depth(broker.names.main_queue) == 0
    status, done = await api.call("POST", "/runs", "operator", json={"task": "<b>ok</b>"})
    assert status == 202, done
    status, _ = await api.call("GET", f"/runs/{done['run_id']}?wait=0", "viewer")
    assert status in (200, 404)  # the id is one GET accepts: never a 400


async def test_the_client_refuses_a_task_name_no_worker_could_register(client: Client) -> None:
    """``enqueue`` with a control character or spaces around the name raises EnqueueError
    naming the form, before anything is sent."""
    for bad in (HOSTILE, "report\n", " report", "x" * 201, ""):
        with pytest.raises(EnqueueError, match=FORM):
            await client.enqueue(bad)


def test_the_command_refuses_a_task_name_with_a_line_break(broker: TestBroker) -> None:
    """``warren enqueue $'a\\nb'`` exits 2 with one line naming the form, no traceback."""
    result = run_warren(broker, "enqueue", "report\nrm -rf")
    assert result.returncode == 2, result.stderr
    assert FORM in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("task", ["a\\u0000b", "a\\tb", " padded"])
def test_a_schedules_file_refuses_such_a_task_name(broker: TestBroker, task: str) -> None:
    """A ``[[schedule]]`` whose task holds a control character is refused, naming the field."""
    text = f'[[schedule]]\nname = "s"\nevery = "1h"\ntask = "{task}"\n'
    with pytest.raises(ScheduleError, match=f"task: .*{FORM}"):
        parse_schedules(text, broker.settings())


async def test_a_runtime_schedule_through_the_api_refuses_it_too(api: Api) -> None:
    """POST /schedules with such a task is a 400 naming the task field."""
    spec: dict[str, Any] = {"name": "bad-task", "every": "1h", "task": "a\u0007b"}
    status, error = await api.call("POST", "/schedules", json={"spec": spec})
    assert status == 400 and "task" in error["error"]["message"] and FORM in str(error)


def test_a_worker_refuses_to_register_a_handler_under_such_a_name() -> None:
    """The worker's registry applies the same rule: no handler under a name no one can enqueue."""
    with pytest.raises(ValueError, match=FORM):
        Registry().register("job\x00", lambda payload, ctx: None)
