"""``warren runs show`` and ``warren runs wait`` on a real broker: output and exit codes."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from tests.failed_records import run_warren
from tests.helpers import registry
from tests.namespace import TestBroker
from warren_cron.cli.runs import EXIT_SUCCEEDED, EXIT_TIMEOUT, EXIT_UNSUCCESSFUL
from warren_cron.client import Client
from warren_cron.errors import PermanentError
from warren_cron.worker.context import TaskContext

pytestmark = pytest.mark.broker


async def ok(payload: Any, ctx: TaskContext) -> dict[str, str]:
    """A handler returning a small result."""
    return {"report": "done"}


async def broken(payload: Any, ctx: TaskContext) -> None:
    """A handler failing for good."""
    raise PermanentError("no such customer")


async def warren(broker: TestBroker, *args: str) -> Any:
    """``warren runs ...`` in a thread, so that in-process workers go on running."""
    return await asyncio.to_thread(run_warren, broker, "runs", *args)


async def test_wait_exits_0_for_a_success_and_prints_its_result(
    broker: TestBroker, client: Client, run_worker: Any
) -> None:
    """A run that succeeds: ``wait`` exits 0, ``show --json`` has its result and attempt."""
    await run_worker(registry(ok=ok))
    done = await client.enqueue("ok")
    waited = await warren(broker, "wait", done.run_id, "--timeout", "30")
    assert waited.returncode == EXIT_SUCCEEDED, waited.stderr
    assert '"report":"done"' in waited.stdout
    shown = await warren(broker, "show", done.run_id, "--json")
    status = orjson.loads(shown.stdout)
    assert (status["state"], status["result"]) == ("succeeded", {"report": "done"})
    assert [a["outcome"] for a in status["attempts"]] == ["succeeded"]


async def test_wait_exits_1_for_a_failed_run_naming_its_error(
    broker: TestBroker, client: Client, run_worker: Any
) -> None:
    """A run that fails: ``wait`` exits 1 and prints the error."""
    await run_worker(registry(broken=broken))
    done = await client.enqueue("broken")
    waited = await warren(broker, "wait", done.run_id, "--timeout", "30")
    assert waited.returncode == EXIT_UNSUCCESSFUL
    assert "failed" in waited.stdout and "no such customer" in waited.stdout


async def test_wait_exits_4_when_the_run_does_not_end_in_time(
    broker: TestBroker, client: Client
) -> None:
    """No worker: ``wait --timeout 1`` exits 4 and says the run may still end."""
    done = await client.enqueue("ok")
    waited = await warren(broker, "wait", done.run_id, "--timeout", "1")
    assert waited.returncode == EXIT_TIMEOUT
    assert "did not end within 1.0s" in waited.stderr


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["wait", "x", "--timeout", "0"], "--timeout must be a positive"),
        (["wait", "x", "--timeout", "soon"], "invalid float value"),
        (["show"], "run_id"),
        (["rerun", "x"], "invalid choice"),
    ],
)
async def test_usage_errors_exit_2_naming_the_problem(
    broker: TestBroker, args: list[str], why: str
) -> None:
    """Bad arguments are refused with exit 2 before the broker is asked anything."""
    result = await warren(broker, *args)
    assert result.returncode == 2 and why in result.stderr, result.stderr


async def test_an_unreachable_broker_exits_3_with_its_password_hidden(broker: TestBroker) -> None:
    """No broker at CRON_AMQP_URL: exit 3, the URL's password hidden."""
    url = "amqp://ops:s3cret@127.0.0.1:1/"
    result = await asyncio.to_thread(run_warren, broker, "runs", "show", "x", CRON_AMQP_URL=url)
    assert result.returncode == 3 and "s3cret" not in result.stderr
