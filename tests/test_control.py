"""The scheduler's history events, and pause and resume through warren schedules."""

from __future__ import annotations

import asyncio
import re
import socket
from datetime import datetime, timedelta
from pathlib import Path

import orjson
import pytest
from structlog.testing import capture_logs

from tests.failed_records import json_out, run_warren
from tests.helpers import history
from tests.namespace import TestBroker
from tests.pausing import matching, schedules_script, wait_events
from tests.scheduling import (
    Schedulers,
    every,
    fire_times,
    published,
    store_watermark,
    wait_published,
    write_schedules,
)
from warren_cron.clock import utc_text, utcnow
from warren_cron.faultkit.waits import eventually
from warren_cron.history.events import Event
from warren_cron.history.run_fold import fold_runs
from warren_cron.scheduler.service import Scheduler

pytestmark = pytest.mark.broker
SECOND = timedelta(seconds=1)


async def published_ids(broker: TestBroker) -> list[str]:
    """Run ids of the fires in the main queue, in publish order."""
    return [env.run_id for _, env in await published(broker)]


async def test_fired_and_skipped_events_reach_the_history_stream(
    broker: TestBroker, schedulers: Schedulers, tmp_path: Path
) -> None:
    """Each confirmed fire is a ``fired`` event, each fire the catch-up dropped a ``skipped``."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1s", retry="{ max_retries = 1, delay_ms = 100 }"))
    await store_watermark(broker, utcnow().replace(microsecond=0) - 4 * SECOND)
    with capture_logs() as logs:
        await schedulers.start(path)
        await wait_published(broker, 3)
        fired = await wait_events(broker, 3, type="fired")
    skipped_logged = [e["run_id"] for e in logs if e["event"] == "fire skipped"]
    messages = {env.run_id: (message, env) for message, env in await published(broker)}
    for event in fired:
        message, env = messages[str(event.run_id)]
        assert (event.schedule, event.get("task"), event.get("plan")) == (
            "tick",
            "noop",
            message.routing_key,
        )
        assert event.get("scheduled_for") == utc_text(env.scheduled_for)
    skipped = matching(await history(broker), type="skipped")
    assert [e.run_id for e in skipped] == skipped_logged and len(skipped) >= 2
    assert all(e.get("reason").startswith("catch_up = latest") for e in skipped)
    runs = fold_runs(await history(broker))
    assert {runs[str(e.run_id)].outcome for e in skipped} == {"skipped"}


async def held_past(instance: Scheduler, moment: datetime, fires: int) -> None:
    """Wait until the leader handled ``fires`` seconds of a 1 s schedule after ``moment``."""

    def handled() -> bool:
        return (instance.handled_up_to or moment) >= moment + fires * SECOND

    await eventually(handled, 15, what=f"{fires} fire(s) handled after {moment}")


def held_ids(folded: Event) -> set[str]:
    """The run ids of the fires a pause's folded ``skipped`` event of a 1 s schedule covers."""
    first = datetime.fromisoformat(folded.get("scheduled_for"))
    last = datetime.fromisoformat(folded.get("last"))
    assert int((last - first).total_seconds()) + 1 == folded.get("count")
    return {f"{folded.schedule}@{utc_text(first + n * SECOND)}" for n in range(folded.get("count"))}


async def test_pause_stops_fires_within_a_second_and_folds_them_into_one_event(
    broker: TestBroker, schedulers: Schedulers, tmp_path: Path
) -> None:
    """After ``pause`` no fire later than a second after the command is published; the first
    fire held back is logged at info, and the pause's held fires are one ``skipped`` event with
    the reason ``paused``, their count and the last of them, written when it is resumed."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1s"))
    with capture_logs() as logs:
        instance = await schedulers.start(path)
        await wait_published(broker, 1)
        result = await schedules_script(broker, path, "pause", "tick", "--reason", "db upgrade")
        assert result.returncode == 0, result.stderr
        [paused] = await wait_events(broker, type="paused")
        await held_past(instance, paused.at, 3)
        assert not matching(await history(broker), type="skipped")
        assert max(await fire_times(broker)) <= paused.at + SECOND
        await schedules_script(broker, path, "resume", "tick")
        [folded] = await wait_events(broker, type="skipped")
    assert (paused.schedule, paused.get("reason")) == ("tick", "db upgrade")
    assert "@" in paused.get("by")
    first = folded.get("scheduled_for")
    assert (folded.get("reason"), folded.run_id) == ("paused", f"tick@{first}")
    assert folded.get("count") >= 2 and not set(await published_ids(broker)) & held_ids(folded)
    lines = [e for e in logs if e["event"] == "fire skipped"]
    assert [(e["reason"], e["log_level"]) for e in lines] == [("paused", "info")]
    assert [e["by"] for e in logs if e["event"] == "schedule paused"] == [paused.get("by")]


async def test_a_leader_that_stops_during_a_pause_records_the_fires_it_held(
    broker: TestBroker, schedulers: Schedulers, tmp_path: Path
) -> None:
    """The held fires of a pause still lasting are one ``skipped`` event when the term ends."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1s"))
    instance = await schedulers.start(path)
    await schedules_script(broker, path, "pause", "tick", "--reason", "r")
    [paused] = await wait_events(broker, type="paused")
    await held_past(instance, paused.at, 2)
    await schedulers.stop(instance)
    [folded] = await wait_events(broker, type="skipped")
    assert folded.get("reason") == "paused" and folded.get("count") >= 2
    assert not set(await published_ids(broker)) & held_ids(folded)


@pytest.mark.parametrize("catch_up", [False, True])
async def test_fires_missed_while_paused_are_published_only_on_resume_with_catch_up(
    broker: TestBroker, schedulers: Schedulers, tmp_path: Path, catch_up: bool
) -> None:
    """A plain resume runs none of the fires skipped while paused; ``--catch-up`` runs them
    under the schedule's catch_up policy (``all``: every one), each once: the next leader
    does not run them again."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1s", catch_up='"all"'))
    instance = await schedulers.start(path)
    await wait_published(broker, 1)
    await schedules_script(broker, path, "pause", "tick", "--reason", "r")
    [paused] = await wait_events(broker, type="paused")
    await held_past(instance, paused.at, 3)
    flags = ["--catch-up"] if catch_up else []
    result = await schedules_script(broker, path, "resume", "tick", *flags)
    assert result.returncode == 0, result.stderr
    [resumed] = await wait_events(broker, type="resumed")
    assert resumed.get("catch_up") is catch_up

    async def fired_after_resume() -> bool:
        return max(await fire_times(broker)) > resumed.at

    await eventually(fired_after_resume, 10)
    [folded] = await wait_events(broker, type="skipped", reason="paused")
    held = held_ids(folded)

    async def caught_up() -> bool:
        return held <= set(await published_ids(broker))

    if catch_up:
        await eventually(caught_up, 10)
    ids = await published_ids(broker)
    assert (held <= set(ids)) if catch_up else not (held & set(ids))
    await schedulers.stop(instance)
    await schedulers.start(path)
    await wait_published(broker, len(ids) + 2)
    ids = await published_ids(broker)
    assert len(ids) == len(set(ids)) and (held <= set(ids)) is catch_up


async def test_pause_and_resume_say_when_there_is_nothing_to_do(
    broker: TestBroker, tmp_path: Path
) -> None:
    """A second pause, or a resume of a running schedule, exits 0 and sends no command."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1h"))
    not_paused = await schedules_script(broker, path, "resume", "tick")
    assert (not_paused.returncode, not_paused.stdout) == (0, "tick is not paused; nothing sent\n")
    for _ in range(2):
        result = await schedules_script(broker, path, "pause", "tick", "--reason", "first")
        assert result.returncode == 0, result.stderr
    assert "already paused" in result.stdout and "first" in result.stdout
    assert len(matching(await history(broker), type="paused")) == 1
    listed = await schedules_script(broker, path, "list", "--json")
    [row] = orjson.loads(listed.stdout)
    assert (row["name"], row["paused"], row["reason"]) == ("tick", True, "first")
    assert datetime.fromisoformat(row["paused_since"]) <= utcnow()


async def test_list_and_status_agree_that_a_paused_schedule_has_no_next_fire(
    broker: TestBroker, tmp_path: Path
) -> None:
    """``schedules.py list`` and ``status.py`` show ``-`` for a paused schedule's next fire
    (JSON null) and the same next fire for a running one."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("held", "1d") + every("tick", "1d"))
    paused = await schedules_script(broker, path, "pause", "held", "--reason", "migration")
    assert paused.returncode == 0, paused.stderr
    listed = await schedules_script(broker, path, "list", "--json")
    status = await asyncio.to_thread(
        run_warren, broker, "status", "--json", CRON_SCHEDULES_FILE=str(path)
    )
    for rows in (orjson.loads(listed.stdout), json_out(status)):
        fires = {row["name"]: row["next_fire_at"] for row in rows}
        assert fires["held"] is None and fires["tick"] is not None, rows
    assert orjson.loads(listed.stdout)[1]["next_fire_at"] == json_out(status)[1]["next_fire_at"]
    table = (await schedules_script(broker, path, "list")).stdout.splitlines()
    held = re.split(r"\s{2,}", table[1])
    assert (held[0], held[1], held[2]) == ("held", "file", "paused"), table
    assert (held[4], held[5].endswith(": migration")) == ("-", True), table


@pytest.mark.parametrize(
    "args", [["trigger", "nope"], ["pause", "nope", "--reason", "r"], ["resume", "nope"]]
)
async def test_an_unknown_schedule_exits_2_listing_the_known_ones(
    broker: TestBroker, tmp_path: Path, args: list[str]
) -> None:
    """A name not in the file is a usage error that names the schedules there are."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("alpha", "1h") + every("beta", "1h"))
    result = await schedules_script(broker, path, *args)
    assert result.returncode == 2
    assert "no schedule 'nope'" in result.stderr and "known: alpha, beta" in result.stderr


async def test_an_unreachable_broker_exits_3_saying_so(broker: TestBroker, tmp_path: Path) -> None:
    """Nothing listens at CRON_AMQP_URL: exit 3 with the URL, its password hidden."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("tick", "1h"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"amqp://guest:secret@127.0.0.1:{port}/"
    result = await schedules_script(
        broker, path, "pause", "tick", "--reason", "r", CRON_AMQP_URL=url
    )
    assert result.returncode == 3
    assert f"cannot reach RabbitMQ at amqp://guest:***@127.0.0.1:{port}/" in result.stderr
    assert "secret" not in result.stderr + result.stdout
