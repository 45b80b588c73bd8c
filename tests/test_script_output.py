"""The ops scripts' output: streamed as records are read, and a closed pipe is a clean end."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest

from tests.failed_records import ROOT, put_failed, script_env
from tests.namespace import TestBroker
from warren_cron.faultkit.processes import WARREN

pytestmark = pytest.mark.broker

LISTING = [
    ["failed", "list", "--json"],
    ["failed", "list"],
    ["failed", "show", "no-such-run"],
    ["queues", "--json"],
    ["queues"],
    ["status", "--json"],
    ["schedules", "list"],
    ["history", "--json"],
]


def start(broker: TestBroker, command: list[str], stdout: int) -> subprocess.Popen[bytes]:
    """A ``warren`` command in the test's namespace, its output to ``stdout``."""
    return subprocess.Popen(
        [WARREN, *command],
        cwd=ROOT,
        env=script_env(broker, CRON_SCHEDULES_FILE=str(ROOT / "examples" / "schedules.toml")),
        stdout=stdout,
        stderr=subprocess.PIPE,
    )


@pytest.mark.parametrize("command", LISTING, ids=" ".join)
async def test_a_reader_that_closed_the_pipe_ends_the_command_with_0_and_no_traceback(
    broker: TestBroker, command: list[str]
) -> None:
    """As ``| head -1`` that already left: the first write finds the pipe closed."""
    await put_failed(broker, 3)
    read_end, write_end = os.pipe()
    os.close(read_end)
    script = start(broker, command, write_end)
    os.close(write_end)
    _, err = await asyncio.to_thread(script.communicate, timeout=60)
    assert "Traceback" not in err.decode() and "BrokenPipe" not in err.decode(), err.decode()
    assert script.returncode in (0, 1), err.decode()  # 1: show found no such run, as asked


async def test_failed_list_writes_its_first_row_before_it_has_read_every_record(
    broker: TestBroker,
) -> None:
    """``list --json | head -1`` on 3,000 records: the first row comes while most are unread,
    and the command ends with 0 when head leaves."""
    envs = await put_failed(broker, 3000)
    script = start(broker, ["failed", "list", "--json"], subprocess.PIPE)
    assert script.stdout is not None
    first = await asyncio.to_thread(script.stdout.readline)
    assert first == b"[\n"
    # The pipe is full and nobody reads it: the command waits, holding what it has read.
    still_ready = await broker.depth(broker.names.failed_queue)
    assert 0 < still_ready < len(envs)
    script.stdout.close()
    _, err = await asyncio.to_thread(script.communicate, timeout=60)
    assert script.returncode == 0 and b"Traceback" not in err, err.decode()
