"""What the cluster tests do on a three-node cluster: workers placed on a node, a workload
flowing, what "nothing lost" means, and a run that holds an overlap lock."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.faults.harness import FREEZE_SECONDS, ClusterScenario
from tests.faults.test_scheduler_faults import LEADING
from tests.namespace import TestBroker, namespace_for
from warren_cron.broker.connect import connect
from warren_cron.envelope import Envelope
from warren_cron.faultkit.install import release
from warren_cron.faultkit.ledger import Fate, Ledger
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.private_cluster import PrivateCluster
from warren_cron.faultkit.processes import Proc, Procs, base_env
from warren_cron.faultkit.scenario import StillInFlight
from warren_cron.faultkit.waits import NeverHappened, eventually
from warren_cron.faultkit.workload import ledger_envelope, workload
from warren_cron.names import Names
from warren_cron.runtime.settings import CronSettings

#: Workers whose attempts may outlast a node's failure detection (the nodes' own consumer
#: timeout, 4 s, is raised for them while the test runs).
LONG_ATTEMPTS = {"CRON_CONSUMER_TIMEOUT_SECONDS": "120", "CRON_TASK_TIMEOUT_SECONDS": "60"}


@contextlib.asynccontextmanager
async def cluster_scenario(
    whole: PrivateCluster, ledger: Ledger, tmp_path: Path, item: pytest.Item
) -> AsyncIterator[ClusterScenario]:
    """A quorum-queue scenario of test ``item`` on the cluster; its processes are killed,
    its namespace deleted and every node started again afterwards."""
    settings = CronSettings(amqp_url=whole.url, heartbeat_seconds=2)
    connection = await connect(settings, f"test:{item.name}", log_outages=False)
    broker = TestBroker(whole.url, namespace_for(item), connection)
    broker.queue_type = "quorum"
    procs = Procs(tmp_path, base_env(whole.url, broker.names.namespace, ledger.path))
    made = ClusterScenario(whole, broker, ledger, procs)
    try:
        yield made
    finally:
        procs.kill_all()
        await made.close()
        whole.restart_all()
        await connection.close()
        await broker.cleanup()


#: How long a new leader may take from winning the lock to its first fires while a node is
#: lost: its term reads the watermark (a quorum queue) and the pause and runtime-schedule
#: streams, which wait for a new leader of their own when theirs was on the lost node (20 to
#: 30 s measured on 4.3, where a read can hit the broker's 30 s timeout and is tried again).
#: Under CI's load a 4.3.6 lock queue once answered no probe and no consume for over 70 s
#: after a freeze (the scheduler tried again every 30 s), so the bound leaves room for a
#: fourth try.
TERM_START_SECONDS = 120


#: RabbitMQ 4.2 and later keep the exclusive queues of a node seen down until that node is
#: back (or forgotten) instead of deleting them: the overlap locks it held stay held meanwhile
#: (the scheduler's leader lock is a quorum queue and does not wait).
LOCKS_WAIT_FOR_THE_NODE = release() == "4.3"


async def back_if_locks_wait(node: PrivateBroker, frozen: bool = False) -> None:
    """On 4.3, bring a killed or frozen ``node`` back: only then are the locks held there
    dropped. A frozen one first stays frozen until its clients gave up their connections."""
    if not LOCKS_WAIT_FOR_THE_NODE:
        return
    if frozen:
        await asyncio.sleep(FREEZE_SECONDS)
    node.thaw()
    await asyncio.to_thread(node.start)


def first_node_url(cluster: PrivateCluster, first: PrivateBroker) -> str:
    """``CRON_AMQP_URL`` listing every node, ``first`` first: a process connects there."""
    others = [node.url for node in cluster.nodes if node is not first]
    return ",".join([first.url, *others])


async def workers_on(
    scenario: ClusterScenario, node: PrivateBroker, count: int = 2, **env: str
) -> list[Proc]:
    """``count`` worker processes connected to ``node`` (and given the others after it)."""
    url = first_node_url(scenario.node, node)
    return [await scenario.worker(CRON_AMQP_URL=url, **env) for _ in range(count)]


async def flowing(scenario: ClusterScenario, tasks: int = 60, attempts: int = 10) -> None:
    """Publish a mixed workload of half-second tasks and wait until ``attempts`` ran."""
    await scenario.publish(workload(tasks, 7, seconds=0.3))
    await eventually(lambda: scenario.ledger.count_attempts() >= attempts, 60)


async def nothing_lost(scenario: ClusterScenario, workers: list[Proc]) -> None:
    """Twenty more tasks complete on the same workers, and the ledger finds nothing lost."""
    later = [ledger_envelope("ok") for _ in range(20)]
    await scenario.publish((env, "ok") for env in later)
    report = await scenario.check(timeout=120)
    assert all(worker.alive() for worker in workers), "a worker died with its node"
    assert {report.runs[env.run_id].fate for env in later} == {Fate.COMPLETED}


@contextlib.contextmanager
def stuck_on_3_10(scenario: ClusterScenario, retry_queues: bool = False) -> Iterator[None]:
    """An expected failure for the one outcome RabbitMQ 3.10 is known for when a quorum leader
    dies (docs/reliability.md, "What is not guaranteed"): tasks still in the main queue when the
    wait for quiet ends, or with ``retry_queues`` in a retry queue (the same dead-letter
    worker, whose target is then the main queue). A pass is a pass; a loss, any other failure,
    or this one on 4.x fails."""
    try:
        yield
    except StillInFlight as stuck:
        if release() == "3" and _stranded(scenario.names, stuck.left, retry_queues):
            where = "a retry queue" if retry_queues else "the main queue"
            pytest.xfail(f"3.10 left tasks stuck in {where}: {stuck.left}")
        raise


def _stranded(names: Names, left: dict[str, int], retry_queues: bool) -> bool:
    if names.main_queue in left:
        return True
    return retry_queues and any(queue.startswith(names.retry_prefix) for queue in left)


def locked_run(seconds: float) -> tuple[Envelope, str]:
    """A fire of the ``Forbid`` schedule ``locked`` that runs ``seconds``: it holds the lock."""
    run = ledger_envelope("ok", seconds=seconds)
    update = {"schedule": "locked", "concurrency": "Forbid", "timeout_seconds": 60}
    return run.model_copy(update=update), "ok"


def both_logs(old: Proc, standby: Proc) -> str:
    """The ends of both schedulers' logs."""
    return f"old leader:\n{old.log()[-3000:]}\nstandby:\n{standby.log()[-3000:]}"


async def new_leader(old: Proc, standby: Proc, timeout: float = 60) -> Proc:
    """Wait until a scheduler leads again once ``old`` lost its lock: the standby, or ``old``
    itself reconnected through another node (whichever declares the lock queue first)."""

    def leads() -> Proc | None:
        return standby if standby.count(LEADING) else old if old.count(LEADING) > 1 else None

    try:
        await eventually(lambda: leads() is not None, timeout, interval=0.2)
    except NeverHappened as error:
        raise AssertionError(
            f"no scheduler leads {timeout} s after the takeover:\n{both_logs(old, standby)}"
        ) from error
    taken = old.count(LEADING) + standby.count(LEADING)
    assert taken == 2, f"two schedulers took the lock:\n{both_logs(old, standby)}"
    return leads()  # type: ignore[return-value]


async def stop_schedulers(*schedulers: Proc) -> None:
    """Stop every scheduler cleanly before the fires are judged: a fire published after the
    judged range would count as unexpected."""
    codes = await asyncio.gather(*(proc.terminate() for proc in schedulers))
    assert codes == [0] * len(schedulers), f"exit codes {codes}:\n{both_logs(*schedulers)}"


def event_times(proc: Proc, event: str) -> list[str]:
    """The timestamps (ISO, UTC, one clock: the same host) of ``proc``'s log lines ``event``."""
    times = []
    for line in proc.log().splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and record.get("event") == event:
                times.append(str(record["timestamp"]))
    return times


def stepped_down_first(old: Proc, new: Proc) -> None:
    """Assert that ``old`` gave up leading (its lease ran out, or its connection was lost)
    before ``new`` began to lead: never two leaders at once."""
    if new is old:
        return  # it led again after stepping down
    ends = event_times(old, STEPPED_DOWN) + event_times(old, LOST)
    [began] = event_times(new, "leading")
    assert ends and min(ends) < began, f"two leaders at once:\n{both_logs(old, new)}"


def confirmed_nothing_once_taken_over(old: Proc, new: Proc) -> None:
    """Assert that ``old`` got no fire confirmed from the moment ``new`` began to lead: what
    keeps a cut-off leader from firing twice while its lease has not yet run out."""
    if new is old:
        return
    [began] = event_times(new, "leading")
    late = [at for at in event_times(old, "fire published") if at >= began]
    assert late == [], f"fires confirmed to both leaders:\n{both_logs(old, new)}"


#: What a leader logs when it stops leading: its lease ran out, or its connection closed.
STEPPED_DOWN = "leader lease ran out: no probe came back"
LOST = "not leading: cannot reach the broker or lost the connection; trying again"
