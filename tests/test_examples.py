"""The demo's handlers (examples/demo_handlers.py), tested with the testing kit, no broker."""

from __future__ import annotations

from unittest import mock

import pytest

from examples.demo_handlers import Flakiness, Greeting, Odds, broken, flaky, greet, sometimes
from warren_cron.errors import EnqueueError
from warren_cron.testing import EagerClient, run_task


async def test_greet_greets_whom_its_payload_names(warren_eager: EagerClient) -> None:
    """An enqueue through the handle runs it in the test; its result is the greeting."""
    done = await greet.enqueue(Greeting(name="operator"))
    assert await greet.result(done) == "hello operator"
    (line,) = [log for log in warren_eager.runs[done.run_id].logs if log["event"] == "hello"]
    assert line["name"] == "operator"


async def test_flaky_recovers_on_its_third_attempt() -> None:
    """Two failures, retried on the plan's delays (virtual), then success."""
    run = await run_task(flaky, Flakiness(fail_attempts=2), plan="10s-20s-40s")
    assert (run.state, run.result, run.delays) == ("succeeded", 3, [10, 20])


async def test_sometimes_fails_as_its_coin_says() -> None:
    """Tails on every toss spends the plan; heads succeeds at once."""
    with mock.patch("examples.demo_handlers.random.random", return_value=0.1):
        tails = await run_task(sometimes, Odds(failure_rate=0.5), plan="1m")
    with mock.patch("examples.demo_handlers.random.random", return_value=0.9):
        heads = await run_task(sometimes, Odds(failure_rate=0.5), plan="1m")
    assert (tails.state, tails.reason, heads.state) == ("failed", "retries-exhausted", "succeeded")


async def test_broken_spends_its_whole_plan() -> None:
    """Every attempt fails; the last one's error is the run's."""
    run = await run_task(broken, None, plan="1m-2m")
    assert (run.state, run.reason, len(run.attempts)) == ("failed", "retries-exhausted", 3)
    assert run.error == "ConnectionError: database unreachable"


async def test_odds_out_of_range_are_refused_at_enqueue(warren_eager: EagerClient) -> None:
    """A failure rate above 1 is no payload of ``sometimes``: nothing is sent."""
    with pytest.raises(EnqueueError, match="failure_rate: Input should be less than or equal"):
        await sometimes.enqueue({"failure_rate": 2})  # type: ignore[arg-type]
    assert warren_eager.enqueued == []
