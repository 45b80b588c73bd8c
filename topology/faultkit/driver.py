"""The chaos run: a mixed workload while a seeded driver breaks workers, connections and broker.

Used by ``scripts/chaos.py`` (10,000 tasks by default) and, smaller, by the test suite. The
driver waits a random pause, then does one of:

- ``kill-worker``: ``kill -9`` a worker mid-task and start a new one;
- ``term-worker``: SIGTERM a worker (it must exit 0) and start a new one;
- ``close-connections``: ``rabbitmqctl close_all_connections``;
- ``restart-broker``: stop the node (on a cluster, a node chosen at random) cleanly, then
  start it;
- ``kill-broker``: ``kill -9`` the node (or a cluster's node), then start it.

The two broker faults run on quorum queues only: classic queues dead-letter at most once, so
a broker crash, or a clean stop that shuts the queues down one by one, may lose a task
between two queues.

It stops once every task is published and nothing is in flight; then the run goes quiet
without faults and the ledger classifies every task.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from warren_cron.faultkit.ledger import Report
from warren_cron.faultkit.processes import Proc
from warren_cron.faultkit.scenario import Scenario, StillInFlight
from warren_cron.faultkit.workload import workload

#: Every fault the driver knows, with its weight when it picks one.
FAULTS: dict[str, int] = {
    "kill-worker": 4,
    "term-worker": 2,
    "close-connections": 2,
    "restart-broker": 1,
    "kill-broker": 1,
}
#: Faults that a classic-queue run leaves out (see the module docstring).
UNSAFE_ON_CLASSIC = frozenset({"restart-broker", "kill-broker"})


@dataclass
class ChaosConfig:
    """What to run and how hard to break it."""

    tasks: int = 10_000
    workers: int = 3
    prefetch: int = 16
    seed: int = 0
    pause: tuple[float, float] = (1.0, 4.0)
    faults: tuple[str, ...] = tuple(FAULTS)
    max_seconds: float = 1800
    quiet_seconds: float = 300
    task_seconds: float = 0.05
    #: Tasks published a second (None: as fast as the broker confirms them).
    rate: float | None = 50.0
    #: Faults to do in this order, cycling, instead of drawing them at random; the run goes
    #: on until each has been done once, even if the work is done sooner.
    sequence: tuple[str, ...] = ()


@dataclass
class ChaosResult:
    """The ledger's verdict plus what the driver did."""

    report: Report
    faults: list[tuple[float, str]]
    seconds: float
    left_in_flight: dict[str, int] | None
    bad_exits: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing was lost, unexpected, unexplained, left over or badly stopped."""
        report = self.report
        return not (
            report.lost
            or report.unexpected
            or report.unexplained
            or self.left_in_flight
            or self.bad_exits
        )

    def table(self) -> str:
        """The fault counts and the ledger table."""
        counts = Counter(name for _, name in self.faults)
        lines = [f"faults: {dict(sorted(counts.items()))}", ""]
        lines.append(self.report.table())
        lines.append("")
        lines.append(f"left in flight: {self.left_in_flight or 0}")
        lines.append(f"workers that exited non-zero on SIGTERM: {len(self.bad_exits)}")
        lines.append(f"duration: {self.seconds:.1f} s")
        return "\n".join(lines)


class Chaos:
    """Runs one chaos experiment on a prepared scenario."""

    def __init__(self, scenario: Scenario, config: ChaosConfig) -> None:
        self.scenario = scenario
        self.config = config
        self.rng = random.Random(config.seed)  # noqa: S311 - reproducible chaos, not a secret
        self.workers: list[Proc] = []
        self.faults: list[tuple[float, str]] = []
        self.bad_exits: list[int] = []
        self._started = 0.0
        allowed = set(config.faults)
        if scenario.queue_type == "classic":
            allowed -= UNSAFE_ON_CLASSIC
        self._choices = [name for name in FAULTS if name in allowed]

    async def run(self) -> ChaosResult:
        """Publish, break things until the work is done, wait for quiet, and judge."""
        self._started = time.monotonic()
        tasks = workload(self.config.tasks, self.config.seed, seconds=self.config.task_seconds)
        self.workers = [await self._spawn().ready() for _ in range(self.config.workers)]
        publishing = asyncio.create_task(
            self.scenario.publish(tasks, parallel=64, rate=self.config.rate)
        )
        await self._drive(publishing)
        await self._ensure_workers()
        left: dict[str, int] | None = None
        try:
            report = await self.scenario.wait_quiet(self.config.quiet_seconds)
        except StillInFlight:
            left = await self.scenario.in_flight()
            report = self.scenario.ledger.report()
        seconds = time.monotonic() - self._started
        return ChaosResult(report, self.faults, seconds, left, self.bad_exits)

    async def _drive(self, publishing: asyncio.Task[None]) -> None:
        deadline = self._started + self.config.max_seconds
        while time.monotonic() < deadline:
            await asyncio.sleep(self.rng.uniform(*self.config.pause))
            done_faulting = len(self.faults) >= len(self.config.sequence)
            if publishing.done() and done_faulting and await self._idle():
                break
            if self._choices:
                await self._fault(self._next())
        await publishing

    def _next(self) -> str:
        if self.config.sequence:
            return self.config.sequence[len(self.faults) % len(self.config.sequence)]
        return self.rng.choice([name for name in self._choices for _ in range(FAULTS[name])])

    async def _idle(self) -> bool:
        report = await self.scenario.collect_report()
        return not report.lost and await self.scenario.in_flight() == {}

    async def _fault(self, name: str) -> None:
        self.faults.append((time.monotonic() - self._started, name))
        actions: dict[str, Callable[[], Awaitable[None]]] = {
            "kill-worker": self._kill_worker,
            "term-worker": self._term_worker,
            "close-connections": self._close_connections,
            "restart-broker": self._restart_broker,
            "kill-broker": self._kill_broker,
        }
        await actions[name]()
        await self._ensure_workers()

    async def _kill_worker(self) -> None:
        self.rng.choice(self.workers).kill()

    async def _term_worker(self) -> None:
        code = await self.rng.choice(self.workers).terminate(timeout=60)
        if code != 0:
            self.bad_exits.append(code)

    async def _close_connections(self) -> None:
        await asyncio.to_thread(self.scenario.node.ctl, "close_all_connections", "chaos")

    async def _restart_broker(self) -> None:
        node = self.scenario.node.victim(self.rng)
        await asyncio.to_thread(node.stop)
        await asyncio.to_thread(node.start)

    async def _kill_broker(self) -> None:
        node = self.scenario.node.victim(self.rng)
        await asyncio.to_thread(node.kill)
        await asyncio.to_thread(node.start)

    async def _ensure_workers(self) -> None:
        for index, proc in enumerate(self.workers):
            if not proc.alive():
                self.workers[index] = self._spawn()

    def _spawn(self) -> Proc:
        return self.scenario.spawn_worker(CRON_PREFETCH=str(self.config.prefetch))
