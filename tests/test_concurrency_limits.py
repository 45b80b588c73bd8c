"""Concurrency limits by key across workers: never more than N attempts at once, waiting tasks
spend no attempt, and a dead worker's slots are free at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.conftest import plan
from tests.helpers import envelope, publish
from tests.namespace import TestBroker
from tests.scheduling import Spawner
from tests.test_overlap import two_workers, who_logged
from warren_cron.errors import SettingsError
from warren_cron.faultkit.waits import eventually
from warren_cron.worker.context import TaskContext
from warren_cron.worker.registry import Registry
from warren_cron.worker.slots import Limit, parse_limits


class Ledger:
    """Start and end of every attempt of the ``busy`` task, and the attempt numbers."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float, str]] = []
        self.attempts: list[int] = []

    async def busy(self, payload: Any, ctx: TaskContext) -> None:
        """Hold the slot for ``payload['seconds']``."""
        started = time.monotonic()
        self.attempts.append(ctx.attempt)
        await asyncio.sleep(float(payload["seconds"]))
        self.spans.append((started, time.monotonic(), str(payload.get("customer"))))

    def most_at_once(self, customer: str | None = None) -> int:
        """The most attempts that overlapped (of one customer when given)."""
        spans = [s for s in self.spans if customer is None or s[2] == customer]
        return max(sum(1 for a, b, _ in spans if a <= start < b) for start, _, _ in spans)


async def limited_workers(
    run_worker: Any, count: int, limits: str | None, **settings: Any
) -> Ledger:
    """Start ``count`` in-process workers running ``busy`` under ``limits`` (and other
    ``settings``); their ledger."""
    ledger, registry = Ledger(), Registry()
    registry.register("busy", ledger.busy)
    for _ in range(count):
        await run_worker(registry, concurrency_limits=limits or "", prefetch=8, **settings)
    return ledger


def test_limits_read_task_and_payload_field_forms() -> None:
    """``report=2`` limits a task, ``sync[customer]=1`` a task per payload value,
    ``http[@host]=4`` a task per destination host."""
    assert parse_limits(["report=2", "sync[customer]=1", "http[@host]=4"]) == {
        "report": Limit("report", 2),
        "sync": Limit("sync", 1, "customer"),
        "http": Limit("http", 4, "@host"),
    }


@pytest.mark.parametrize(
    "entry", ["report", "report=0", "report=1000", "r[a b]=1", "=2", "r[@port]=1", "r=" + "9" * 99]
)
def test_a_malformed_limit_is_refused_naming_the_entry_and_the_form(entry: str) -> None:
    """Bad input says what is wrong and what it should look like."""
    with pytest.raises(SettingsError, match=r"CRON_CONCURRENCY_LIMITS entry .* task=N"):
        parse_limits([entry])


@pytest.mark.broker
async def test_workers_racing_never_run_more_than_the_limit_and_spend_no_attempt(
    broker: TestBroker, run_worker: Any
) -> None:
    """Three workers, eight tasks, a limit of 2: at most two run at once, all run as attempt 1."""
    ledger = await limited_workers(run_worker, 3, "busy=2")
    for _ in range(8):
        await publish(broker, envelope("busy", {"seconds": 0.4}), plan(60_000))
    await eventually(lambda: len(ledger.spans) == 8, timeout=40)
    assert ledger.most_at_once() == 2
    assert set(ledger.attempts) == {1}


@pytest.mark.broker
async def test_a_payload_key_limits_each_value_on_its_own(
    broker: TestBroker, run_worker: Any
) -> None:
    """One at a time per customer, two customers side by side."""
    ledger = await limited_workers(run_worker, 2, "busy[customer]=1")
    for customer in ("a", "b", "a", "b"):
        payload = {"seconds": 0.4, "customer": customer}
        await publish(broker, envelope("busy", payload), plan(60_000))
    await eventually(lambda: len(ledger.spans) == 4, timeout=40)
    assert ledger.most_at_once("a") == ledger.most_at_once("b") == 1
    assert ledger.most_at_once() == 2


@pytest.mark.broker
async def test_every_port_of_a_host_shares_its_slots_and_garbage_keys_are_keys(
    broker: TestBroker, run_worker: Any
) -> None:
    """``busy[@host]=1``: six ports of one host run one at a time; tasks whose url is
    missing, garbage or huge share the key ``-`` and also run, one at a time."""
    ledger = await limited_workers(run_worker, 2, "busy[@host]=1")
    for port in range(6):
        url = f"http://127.0.0.1:{8000 + port}/"
        payload = {"seconds": 0.2, "url": url, "customer": "host"}
        await publish(broker, envelope("busy", payload), plan(60_000))
    bad_urls: list[object] = [None, "\x00garbage", "x" * 100_000, {"not": "a url"}]
    for bad in bad_urls:
        payload = {"seconds": 0.2, "url": bad, "customer": "none"}
        await publish(broker, envelope("busy", payload), plan(60_000))
    await eventually(lambda: len(ledger.spans) == 10, timeout=40)
    assert ledger.most_at_once("host") == ledger.most_at_once("none") == 1
    assert set(ledger.attempts) == {1}


@pytest.mark.broker
async def test_a_worker_killed_holding_a_slot_frees_it_at_once(
    broker: TestBroker, spawn: Spawner
) -> None:
    """SIGKILL the worker running the only slot's task: the other worker runs it next."""
    workers = await two_workers(broker, spawn, CRON_CONCURRENCY_LIMITS="hold=1")
    held = envelope("hold", {"seconds": 60}, timeout_seconds=90)
    await publish(broker, held, plan(60_000))
    await eventually(lambda: [e for w in workers for e in w.named("hold started")], 15)
    holder = who_logged(workers, "hold started", held.run_id)
    [other] = [w for w in workers if w is not holder]
    await holder.kill()
    await eventually(
        lambda: [e for e in other.named("hold started") if e["run_id"] == held.run_id], 15
    )
