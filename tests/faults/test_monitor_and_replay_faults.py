"""The monitor and the replay tool when the broker goes away under them."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from tests.conftest import plan
from tests.failed_records import ROOT, ids_in, json_out, put_failed, run_warren, script_env
from tests.faults.harness import FREEZE_SECONDS, FaultScenario
from tests.namespace import TestBroker
from warren_cron.failed.replay import WINDOW, Replayer, ReplayOptions
from warren_cron.failed.select import RecordFilter
from warren_cron.faultkit.ledger import Fate
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.processes import WARREN, Proc
from warren_cron.faultkit.waits import eventually
from warren_cron.faultkit.workload import ledger_envelope
from warren_cron.runtime.settings import CronSettings

pytestmark = pytest.mark.faults

TASK_FAILED = '"task failed"'


async def fail_one(scenario: FaultScenario, monitor: Proc, count: int) -> None:
    """Publish a task that fails for good and wait until the monitor reported ``count``."""
    await scenario.publish([(ledger_envelope("permanent", permanent=True), "permanent")])
    await monitor.wait_log(TASK_FAILED, count=count, timeout=60)


async def test_the_monitor_reports_failures_after_lost_connections_and_a_frozen_broker(
    scenario: FaultScenario,
) -> None:
    """After closed connections and a frozen broker the same monitor logs every failure."""
    await scenario.prepare()
    await scenario.worker()
    monitor = await scenario.procs.spawn(
        ["-m", "warren_cron.monitor"], '"monitor started"', **scenario.worker_env()
    ).ready()
    await fail_one(scenario, monitor, 1)
    await asyncio.to_thread(scenario.node.ctl, "close_all_connections", "fault test")
    await fail_one(scenario, monitor, 2)
    scenario.node.freeze()
    try:
        await asyncio.sleep(FREEZE_SECONDS)  # past the heartbeat grace: it must reconnect
    finally:
        scenario.node.thaw()
    await fail_one(scenario, monitor, 3)
    assert monitor.alive()
    await scenario.check()


async def test_a_broker_killed_during_a_replay_loses_no_task(
    scenario: FaultScenario, tmp_path: Path
) -> None:
    """kill -9 of the broker mid-replay: each task completes or stays in the failed queue; one
    that ran twice is one the replay named as sent again after its confirm was lost."""
    scenario.broker.queue_type = "quorum"
    await scenario.prepare()
    flag = tmp_path / "still-broken"
    flag.touch()
    tasks = [ledger_envelope("replayed", permanent_while=str(flag)) for _ in range(150)]
    await scenario.publish((env, "replayed") for env in tasks)
    await scenario.worker()
    await scenario.broker.wait_depth(scenario.names.failed_queue, len(tasks), timeout=60)
    flag.unlink()  # the cause is fixed: replayed tasks now succeed
    replay = scenario.procs.spawn(
        [WARREN, "failed", "replay", "--all", "--rate", "50"],
        '"replayed"',
        **scenario.worker_env(),
    )
    await eventually(lambda: scenario.ledger.count_attempts() >= len(tasks) + 20, timeout=60)
    await asyncio.to_thread(scenario.node.kill)
    await asyncio.to_thread(scenario.node.start)
    assert await replay.wait(timeout=120) == 0, replay.log()[-2000:]
    report = await scenario.wait_quiet(timeout=90)
    assert (report.lost, report.unexpected) == ([], []), report.table()
    resent = said_sent_again(replay)
    for env in tasks:
        run = report.runs[env.run_id]
        assert run.fate in (Fate.COMPLETED, Fate.DUPLICATED), run
        if run.fate is Fate.DUPLICATED:  # redelivered, sent again, or its record kept
            kept = run.successes == 1 and run.records
            assert run.explained() or kept or env.run_id in resent, run
    if resent:
        assert f"{len(resent)} sent again after the broker went away" in replay.log()


def said_sent_again(replay: Proc) -> set[str]:
    """The run ids a replay process logged as sent again after their confirm was lost."""
    return set(re.findall(r"record sent again: .* run_id=(\S+)", replay.log()))


@pytest.mark.long
async def test_a_replay_of_1000_survives_a_broker_restart_midway(
    broker: TestBroker, private_broker: PrivateBroker
) -> None:
    """Every record ends in the main queue or the failed queue, and the run resumes to the end."""
    envs = await put_failed(broker, 1000)
    broker.plan_keys.add("1m")
    restart: list[asyncio.Future[None]] = []

    def progress(done: int, total: int) -> None:
        if done >= 20 and not restart:
            restart.append(asyncio.ensure_future(asyncio.to_thread(private_broker.restart)))

    settings = CronSettings(namespace=broker.names.namespace, amqp_url=broker.url)
    options = ReplayOptions(
        select=RecordFilter(),
        plan_for=lambda record: plan(60_000),
        # About 25 s in all: the restart (a clean stop, then a boot) cut the replay off
        # only after it had ended when it took 10 s, with two suites on the machine.
        rate=40,
        reconnect_seconds=120,
        progress=progress,
    )
    tally = await Replayer(settings, options).run()
    await restart[0]
    main_ids = await _ids_when_back(broker, broker.names.main_queue)
    failed_ids = await _ids_when_back(broker, broker.names.failed_queue)
    assert set(main_ids) | set(failed_ids) == {env.run_id for env in envs}
    assert tally.reconnects >= 1 and tally.errors == []
    # Records, not reads: those read again after the restart are counted once.
    assert tally.matched == tally.moved == len(envs)
    assert failed_ids == []  # the run resumed and replayed the rest
    # A copy is published again only when its confirm was lost with the connection: at most
    # the records in flight then, which the window bounds.
    assert len(main_ids) - len(set(main_ids)) <= WINDOW


async def test_a_listed_quorum_failed_queue_loses_no_record_when_the_broker_dies_mid_replay(
    broker: TestBroker, private_broker: PrivateBroker
) -> None:
    """list, then replay --all, kill -9 mid-replay: every record replayed or still failed,
    and the replay says so in one line per reconnect and counts records, not reads.

    RabbitMQ 3.10 and 4.0 lose about a quarter of such records when the read hands them back
    after taking them with basic.get (README, "Inspecting, replaying and purging")."""
    broker.queue_type = "quorum"
    envs = await put_failed(broker, 300)
    broker.plan_keys.add("1m")
    await asyncio.to_thread(private_broker.sync_metadata)
    listed = await asyncio.to_thread(run_warren, broker, "failed", "list", "--json")
    assert len(json_out(listed)) == len(envs)
    replay = await asyncio.create_subprocess_exec(
        WARREN, "failed", "replay", "--all", "--rate", "100",
        "--max-retries", "1", "--delay-ms", "60000", cwd=ROOT, env=script_env(broker),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    await broker.wait_depth(broker.names.main_queue, 100, timeout=30)
    await asyncio.to_thread(private_broker.kill)
    await asyncio.to_thread(private_broker.start)
    _, err = await asyncio.wait_for(replay.communicate(), 120)
    main_ids = await _ids_when_back(broker, broker.names.main_queue)
    failed_ids = await _ids_when_back(broker, broker.names.failed_queue)
    expected = {env.run_id for env in envs}
    assert expected - set(main_ids) - set(failed_ids) == set(), err.decode()[-2000:]
    replayed_all = expected <= set(main_ids) and not expected & set(failed_ids)
    assert (replay.returncode == 0) == replayed_all, err.decode()[-2000:]
    said = err.decode()
    assert f"replayed {len(envs)} of {len(envs)} matching" in said, said[-2000:]
    # One line for the outage, not aiormq's tracebacks and a line a second.
    assert "Traceback" not in said and said.count("broker connection lost") == 1, said[-3000:]


async def _ids_when_back(broker: TestBroker, queue: str) -> list[str]:
    """Message ids of a queue once the test's robust connection is back after a restart."""

    async def ids() -> tuple[list[str]] | None:
        try:
            return (await ids_in(broker, queue),)  # a tuple: an empty queue is an answer too
        except Exception:  # the robust connection is still coming back
            return None

    found = await eventually(ids, 60, what=f"{queue} readable", interval=0.5)
    assert found is not None
    return found[0]
