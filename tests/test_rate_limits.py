"""Rate limits across workers, per task, per payload key, per destination host and per
schedule: starts paced to the limit by windows the broker keeps, waiting tasks spend no
attempt, and keys seen once leave nothing behind."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import pytest

from tests.broker import local_names
from tests.conftest import plan
from tests.helpers import envelope, publish, publish_all
from tests.namespace import TestBroker
from tests.scheduling import Spawner, env_for
from tests.test_concurrency_limits import limited_workers
from warren_cron.broker.connect import connect
from warren_cron.broker.exclusive import exists
from warren_cron.errors import SettingsError
from warren_cron.faultkit.waits import eventually
from warren_cron.flowlimits import FlowLimits, Rate, parse_rate
from warren_cron.worker import rates
from warren_cron.worker.rates import RateRule, Windows, parse_rates, window_queue


def test_rates_read_limit_period_burst_and_key() -> None:
    """``report=10/1s`` has a burst of 10; ``sync=100/5m:5`` five over 15 s; ``[customer]``
    and ``[@host]`` key the window."""
    assert parse_rates(["report=10/1s", "sync=100/5m:5", "x[customer]=2/h", "http[@host]=3/s"]) == {
        "report": RateRule("report", Rate(10, 1, 10)),
        "sync": RateRule("sync", Rate(100, 300, 5)),
        "x": RateRule("x", Rate(2, 3600, 2), "customer"),
        "http": RateRule("http", Rate(3, 1, 3), "@host"),
    }
    assert parse_rate("100/5m:5").window == 15


@pytest.mark.parametrize(
    "entry",
    [
        "report=10",
        "report=0/1s",
        "report=1/1d",
        "r=1/s:0",
        "=1/s",
        "r[a b]=1/s",
        "r=" + "9" * 50 + "/s",
    ],
)
def test_a_malformed_rate_is_refused_naming_the_entry_and_the_form(entry: str) -> None:
    """Bad input says what is wrong and what it should look like."""
    with pytest.raises(SettingsError, match=r"CRON_RATE_LIMITS entry .* task=N/PERIOD"):
        parse_rates([entry])


def spaced(starts: list[float], rate: Rate, slack: float = 0.15) -> bool:
    """True when no ``burst + 1`` starts fall within one window, but ``slack`` seconds: the
    time between the broker's confirm and the handler's clock reading, which on a loaded
    machine may be a tenth of a second."""
    starts = sorted(starts)
    gaps = [b - a for a, b in zip(starts, starts[rate.burst :], strict=False)]
    return all(gap >= rate.window - slack for gap in gaps)


Grants = dict[str, list[float]]


@pytest.fixture
def short_windows(monkeypatch: pytest.MonkeyPatch) -> Iterator[Grants]:
    """Windows unused for 2 s expire (a minute in production; declared again every half
    second, 10 s in production), so a test sees them go; and
    when each in-process start got its place in a window, by key (the handler's own start
    may come later on a loaded machine, as the event loop gets to it)."""
    monkeypatch.setattr(rates, "MIN_EXPIRES_SECONDS", 2.0)
    monkeypatch.setattr(rates, "REDECLARE_SECONDS", 0.5)
    granted: Grants = {}
    take = Windows._take

    async def recorded(self: Windows, key: str, rate: Rate) -> Any:
        result = await take(self, key, rate)
        if result is None:
            granted.setdefault(key, []).append(time.monotonic())
        return result

    monkeypatch.setattr(Windows, "_take", recorded)
    yield granted


@pytest.mark.broker
async def test_two_workers_start_tasks_at_the_limit_and_spend_no_attempt(
    broker: TestBroker, run_worker: Any, short_windows: Grants
) -> None:
    """40 tasks at 5 a second: over four seconds in the middle of the run, 20 are granted a
    start (within 10 %), never more than 5 in a second, and every task runs as its attempt
    1."""
    ledger = await limited_workers(run_worker, 2, None, rate_limits="busy=5/1s")
    for _ in range(40):
        await publish(broker, envelope("busy", {"seconds": 0}), plan(60_000))
    await eventually(lambda: len(ledger.spans) == 40, timeout=40)
    # The grants, not the handlers' starts: on a loaded machine a handler begins up to a
    # second after its grant (CI saw 16 handler starts in the four seconds, grants unknown).
    grants = sorted(short_windows["busy"])
    middle = [s for s in grants if grants[0] + 1 <= s < grants[0] + 5]
    assert 18 <= len(middle) <= 22, grants
    assert spaced(short_windows["busy"], Rate(5, 1, 5))
    assert set(ledger.attempts) == {1}


@pytest.mark.broker
async def test_a_payload_key_has_a_window_of_its_own(
    broker: TestBroker, run_worker: Any, short_windows: Grants
) -> None:
    """``busy[customer]=2/1s``: each customer at most 2 a second, the two side by side; a
    customer missing, null, huge or an object is a key like any other, bounded."""
    ledger = await limited_workers(run_worker, 2, None, rate_limits="busy[customer]=2/1s")
    customers: list[Any] = ["a", "b", None, "x" * 100_000, {"nested": [1, 2]}]
    for customer in customers:
        for _ in range(5):
            payload = {"seconds": 0} | ({} if customer is None else {"customer": customer})
            await publish(broker, envelope("busy", payload), plan(60_000))
    await eventually(lambda: len(ledger.spans) == 25, timeout=40)
    by_customer: dict[str, list[float]] = {}
    for start, _, customer in ledger.spans:
        by_customer.setdefault(customer, []).append(start)
    assert len(by_customer) == 5
    assert len(short_windows) == 5
    assert all(spaced(grants, Rate(2, 1, 2)) for grants in short_windows.values())
    # Side by side: every customer's first start before any customer's last (one after the
    # other, five take at least 10 s; a bound on that wall time failed on a loaded machine).
    firsts, lasts = zip(*((min(s), max(s)) for s in by_customer.values()), strict=True)
    assert max(firsts) < min(lasts), by_customer
    assert set(ledger.attempts) == {1}


@pytest.mark.broker
async def test_every_port_of_a_host_shares_its_window(
    broker: TestBroker, run_worker: Any, short_windows: Grants
) -> None:
    """``busy[@host]=2/1s``: ten ports of 127.0.0.1 (and the host in capitals) count as one
    host; another host has its own window."""
    ledger = await limited_workers(run_worker, 2, None, rate_limits="busy[@host]=2/1s")
    urls = [f"http://127.0.0.1:{8000 + port}/x" for port in range(10)]
    urls += [f"https://LOCALHOST:{9000 + port}/" for port in range(4)]
    for url in urls:
        payload = {"seconds": 0, "url": url, "customer": url}
        await publish(broker, envelope("busy", payload), plan(60_000))
    await eventually(lambda: len(ledger.spans) == 14, timeout=40)
    one = [s for s, _, url in ledger.spans if "127.0.0.1" in url]
    assert sorted(short_windows) == ["busy[@host=127.0.0.1]", "busy[@host=localhost]"]
    assert all(spaced(grants, Rate(2, 1, 2)) for grants in short_windows.values())
    assert max(one) - min(one) >= 3.9  # ten starts at two a second: four full windows


@pytest.mark.broker
async def test_a_schedule_names_its_own_rate(
    broker: TestBroker, run_worker: Any, short_windows: Grants
) -> None:
    """A schedule's ``limits.rate`` (carried by its task messages) paces its runs with no
    worker setting; another schedule of the same task is not held back by it."""
    ledger = await limited_workers(run_worker, 2, None)
    limits = FlowLimits(rate="3/1s")
    pairs = [
        (
            envelope("busy", {"seconds": 0, "customer": "slow"}, schedule="slow", limits=limits),
            envelope("busy", {"seconds": 0}, schedule="free"),
        )
        for _ in range(9)
    ]
    # Together: a declare per publish on a loaded machine took longer than the pacing.
    await publish_all(broker, [env for pair in pairs for env in pair], plan(60_000))
    await eventually(lambda: len(ledger.spans) == 18, timeout=40)
    slow_starts = [s for s, _, c in ledger.spans if c == "slow"]
    free_starts = sorted(s for s, _, c in ledger.spans if c != "slow")
    assert list(short_windows) == ["schedule:slow"]
    assert spaced(short_windows["schedule:slow"], Rate(3, 1, 3))
    assert max(slow_starts) - min(slow_starts) >= 1.9
    # The other schedule's runs took no place in any window, and were done before the last
    # paced one started.
    assert free_starts[-1] < max(slow_starts)


@pytest.fixture
async def windows(broker: TestBroker) -> AsyncIterator[Windows]:
    """A ``Windows`` on the test's connection."""
    found = Windows(broker.names.namespace)
    found.start(broker.connection)
    yield found


@pytest.mark.broker
@pytest.mark.usefixtures("short_windows")
async def test_many_keys_leave_no_queue_behind_and_bounded_memory(
    broker: TestBroker, windows: Windows, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 keys seen once: the worker remembers at most ``MAX_REMEMBERED`` of them, and the
    broker deletes each window once unused for its ``x-expires``."""
    monkeypatch.setattr(rates, "MAX_REMEMBERED", 50)
    # Long enough to list them on a loaded machine (rabbitmqctl takes seconds), short
    # enough to wait for.
    monkeypatch.setattr(rates, "MIN_EXPIRES_SECONDS", 8.0)
    rate = Rate(1, 1, 1)
    for index in range(200):
        assert await windows.admit(f"busy[customer={index}]", rate) is None
    assert len(windows._declared) <= 50
    names = [window_queue(broker.names.namespace, f"busy[customer={i}]", rate) for i in range(200)]
    prefix = broker.names.rate_window("")
    listed = local_names(prefix, "queues")
    if listed is None:  # a broker elsewhere: asked by name (a passive declaration renews it)
        assert await exists(broker.connection, names[0])
        return
    # The last ones declared are there (the first may have expired already on a slow run).
    assert set(names[-20:]) <= set(listed)
    # Listing does not renew a queue's lease; declaring it, even passively, would.
    await eventually(lambda: local_names(prefix, "queues") == [], timeout=40, what="no window")


@pytest.mark.broker
async def test_a_window_deleted_under_a_worker_is_declared_again(
    broker: TestBroker, windows: Windows
) -> None:
    """Deleted by hand (a namespace clean-up): the start that finds it gone is deferred, the
    next one declares it again and counts there."""
    rate = Rate(5, 1, 5)
    assert await windows.admit("busy", rate) is None
    channel = await broker.channel()
    await channel.queue_delete(window_queue(broker.names.namespace, "busy", rate))
    deferred = await windows.admit("busy", rate)
    assert deferred is not None and deferred.reason == "rate-limit"
    assert deferred.key == "busy"
    assert await windows.admit("busy", rate) is None
    await channel.queue_delete(window_queue(broker.names.namespace, "busy", rate))


@pytest.mark.broker
async def test_worker_processes_keep_a_schedules_rate_together(
    broker: TestBroker, spawn: Spawner
) -> None:
    """Two worker processes, a schedule's ``rate = "4/1s"`` and no worker setting: 32 runs
    start no more than 4 within any second, and 20 (within 10 %) in the five seconds after
    the first."""
    await broker.declare()
    env = env_for(broker, CRON_HANDLER_MODULES="tests.overlap_handlers", CRON_PREFETCH="8")
    workers = [await spawn(["-m", "warren_cron.worker"], env) for _ in range(2)]
    for process in workers:
        await process.wait_event("worker started")
    limits = FlowLimits(rate="4/1s")
    for _ in range(32):
        paced = envelope("hold", {"seconds": 0}, schedule="paced", limits=limits)
        await publish(broker, paced, plan(60_000))

    def started() -> list[float]:
        lines = [e for w in workers for e in w.named("hold started")]
        return sorted(datetime.fromisoformat(e["timestamp"]).timestamp() for e in lines)

    await eventually(lambda: len(started()) == 32, timeout=60, what="32 runs started")
    starts = started()
    assert spaced(starts, Rate(4, 1, 4))
    middle = [s for s in starts if starts[0] + 1 <= s < starts[0] + 6]
    assert 18 <= len(middle) <= 22, [round(s - starts[0], 2) for s in starts]


@pytest.mark.broker
async def test_a_window_declared_with_other_arguments_defers_and_leaves_no_channel_behind(
    broker: TestBroker,
) -> None:
    """A window queue someone declared with other arguments: each start is deferred saying
    why (the broker closes the channel at the refused declaration), and the worker's robust
    connection holds one channel after ten of them, not one more each."""
    rate = Rate(5, 1, 5)
    channel = await broker.channel()
    await channel.declare_queue(window_queue(broker.names.namespace, "busy", rate))
    connection = await connect(broker.settings(), "test-windows")
    try:
        found = Windows(broker.names.namespace)
        found.start(connection)
        for _ in range(10):
            deferred = await found.admit("busy", rate)
            assert deferred is not None and "cannot reach the window" in (deferred.error or "")
        assert connection.transport is not None
        assert len(connection.transport.connection.channels) <= 1
    finally:
        await connection.close()
        await channel.queue_delete(window_queue(broker.names.namespace, "busy", rate))
