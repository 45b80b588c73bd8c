"""``warren schedules create|update|archive|get`` and ``list`` with runtime schedules."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from tests.failed_records import json_out
from tests.namespace import TestBroker
from tests.pausing import schedules_script
from tests.scheduling import every, write_schedules

pytestmark = pytest.mark.broker


async def test_create_update_archive_and_get_from_the_command_line(
    broker: TestBroker, tmp_path: Path
) -> None:
    """JSON on stdin creates, a TOML file updates, archive stops; get --json shows each
    change with who and why, and list shows both sources with their status."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("from-file", "1h"))
    made = await schedules_script(
        broker,
        path,
        "create",
        "--reason",
        "customer 7",
        stdin='{"name": "rt", "every": "1h", "task": "noop"}',
    )
    assert (made.returncode, made.stdout) == (0, "created rt: version 1, active\n"), made.stderr
    change = tmp_path / "change.toml"
    change.write_text('cron = "0 3 * * *"\ntimezone = "Europe/Berlin"\nevery = "1h"\n')
    bad = await schedules_script(broker, path, "update", "rt", str(change), "--if-version", "1")
    assert bad.returncode == 2 and "cron, every: give exactly one of them" in bad.stderr
    change.write_text('[[schedule]]\ncron = "0 3 * * *"\n')
    moved = await schedules_script(broker, path, "update", "rt", str(change), "--if-version", "1")
    assert moved.returncode == 0, moved.stderr
    table = (await schedules_script(broker, path, "list")).stdout.splitlines()
    assert re.split(r"\s{2,}", table[0])[:3] == ["NAME", "SOURCE", "STATUS"]
    rows = [re.split(r"\s{2,}", line)[:3] for line in table[1:]]
    assert rows == [["from-file", "file", "active"], ["rt", "runtime", "active"]]
    gone = await schedules_script(broker, path, "archive", "rt", "--reason", "churned")
    assert gone.returncode == 0, gone.stderr
    got = json_out(await schedules_script(broker, path, "get", "rt", "--json"))
    assert (got["status"], got["version"], got["spec"]["cron"]) == ("archived", 3, "0 3 * * *")
    assert [(h["kind"], h["reason"]) for h in got["history"]] == [
        ("create", "customer 7"),
        ("update", None),
        ("archive", "churned"),
    ]
    text = (await schedules_script(broker, path, "get", "rt")).stdout
    assert "v3 archive" in text and "churned" in text


async def test_a_stale_version_or_bad_input_exits_2_saying_what_to_fix(
    broker: TestBroker, tmp_path: Path
) -> None:
    """update with an old version names the current one; an invalid cron, a file schedule's
    name and input that is neither JSON nor TOML are refused; nothing is created."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("from-file", "1h"))
    spec = '{"name": "rt", "every": "1h", "task": "noop"}'
    assert (await schedules_script(broker, path, "create", stdin=spec)).returncode == 0
    args = ("update", "rt", "--if-version", "1")
    assert (await schedules_script(broker, path, *args, stdin='{"every": "2h"}')).returncode == 0
    stale = await schedules_script(broker, path, *args, stdin='{"every": "3h"}')
    assert stale.returncode == 2 and "version 2 is current" in stale.stderr
    for stdin, says in [
        ('{"name": "x", "cron": "99 * * * *", "task": "noop"}', "cron"),
        ('{"name": "from-file", "every": "1h", "task": "noop"}', "change it there"),
        ("name = ", "neither JSON nor TOML"),
        ("[1, 2]", "give a table of fields"),
    ]:
        refused = await schedules_script(broker, path, "create", stdin=stdin)
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr
    listed = orjson.loads((await schedules_script(broker, path, "list", "--json")).stdout)
    assert [(r["name"], r["source"], r.get("version")) for r in listed] == [
        ("from-file", "file", None),
        ("rt", "runtime", 2),
    ]


async def test_pause_resume_and_trigger_take_a_runtime_schedule_too(
    broker: TestBroker, tmp_path: Path
) -> None:
    """A runtime schedule is paused (list shows it), resumed and triggered like a file's;
    an archived one is an unknown name (exit 2)."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("from-file", "1h"))
    spec = '{"name": "rt", "every": "1h", "task": "noop"}'
    assert (await schedules_script(broker, path, "create", stdin=spec)).returncode == 0
    paused = await schedules_script(broker, path, "pause", "rt", "--reason", "db move")
    assert (paused.returncode, paused.stdout) == (
        0,
        "paused rt: its fires are skipped until it is resumed\n",
    ), paused.stderr
    listed = orjson.loads((await schedules_script(broker, path, "list", "--json")).stdout)
    assert [(r["name"], r["status"]) for r in listed] == [("from-file", "active"), ("rt", "paused")]
    resumed = await schedules_script(broker, path, "resume", "rt")
    assert resumed.returncode == 0 and resumed.stdout.startswith("resumed rt"), resumed.stderr
    fired = await schedules_script(broker, path, "trigger", "rt")
    assert fired.returncode == 0 and fired.stdout.startswith("rt"), fired.stderr
    await broker.wait_depth(broker.names.main_queue, 1)
    assert (await schedules_script(broker, path, "archive", "rt")).returncode == 0
    gone = await schedules_script(broker, path, "trigger", "rt")
    assert gone.returncode == 2 and "no schedule 'rt'" in gone.stderr
