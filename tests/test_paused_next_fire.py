"""A paused schedule has no next fire anywhere: not in the scheduler's beat, the dashboard's
scheduler line, ``warren status`` or the schedules page, on a real broker."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.dashboard import free_port
from tests.namespace import TestBroker
from tests.pausing import schedules_script
from tests.scheduling import every, write_schedules
from tests.test_status import status
from warren_cron.clock import utcnow
from warren_cron.faultkit.waits import eventually
from warren_cron.monitor import Monitor
from warren_cron.scheduler.service import Scheduler

pytestmark = pytest.mark.broker
#: A schedule firing once a year, half a year from now: its next fire is days ahead.
YEARLY = (
    f'[[schedule]]\nname = "slow"\ncron = "0 0 1 {(utcnow().month + 5) % 12 + 1} *"\n'
    'task = "noop"\n'
)
#: The scheduler line's next fire: ``next in 59m58s``, ``next 3s ago``, ``next -``.
NEXT = re.compile(r"next (in \S+|\S+ ago|-)")


def next_of(line: str) -> str:
    """What a scheduler line says of the next fire."""
    found = NEXT.search(line)
    assert found is not None, line
    return found.group(1)


async def overview_line(url: str) -> str | None:
    """The dashboard's scheduler line once a leader shows in it."""
    async with aiohttp.ClientSession() as http, http.get(url) as got:
        text = await got.text()
    found = re.search(r'id="scheduler"[^>]*>([^<]*)<', text)
    return found.group(1) if found and " leads " in found.group(1) else None


async def test_a_paused_every_2s_schedule_is_no_next_fire_on_any_surface(
    broker: TestBroker, schedulers: Any, run_monitor: Any, tmp_path: Path
) -> None:
    """With ``tick`` (every 2 s) paused beside a yearly ``slow``, the leader's beat, the
    dashboard's scheduler line and ``warren status`` name slow's fire days ahead as the
    next, never one of tick's seconds ahead or ago; tick's rows show no next fire."""
    path = tmp_path / "schedules.toml"
    schedules = write_schedules(broker, path, every("tick", "2s") + YEARLY)
    leader: Scheduler = await schedulers.start(path, scheduler_beat_seconds=0.5)
    monitor: Monitor = await run_monitor(schedules=schedules.schedules, dashboard_port=free_port())
    assert monitor.dashboard is not None and monitor.dashboard.url is not None
    paused = await schedules_script(broker, path, "pause", "tick", "--reason", "db upgrade")
    assert paused.returncode == 0, paused.stderr

    def beyond_tick() -> bool:
        due = leader.next_fire_at
        return due is not None and due > utcnow() + timedelta(days=1)

    await eventually(beyond_tick, 15, what="the leader's next fire to be slow's, not tick's")
    url = monitor.dashboard.url

    async def slow_next() -> str | None:
        line = await overview_line(url)
        return line if line is not None and re.fullmatch(r"in \d+d\S*", next_of(line)) else None

    line = await eventually(slow_next, 15, what="the overview's line to name slow's next fire")
    assert line is not None and "ago" not in next_of(line)
    code, rows, err = await status(broker, path, "--json")
    assert code == 0, err
    assert {r["name"]: r["next_fire_at"] for r in rows}["tick"] is None
    code, text, err = await status(broker, path)
    assert code == 0, err
    assert re.fullmatch(r"in \d+d\S*", next_of(str(text).splitlines()[0]))
    async with aiohttp.ClientSession() as http, http.get(url + "schedules") as got:
        page = await got.text()
    [row] = re.findall(r'data-schedule="tick">(.*?)</tr>', page, re.S)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert "paused" in cells[2] and cells[7] == "-"  # the column "next fire"
