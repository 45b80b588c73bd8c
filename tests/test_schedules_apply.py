"""``warren schedules apply FILE``: a file as the declarative source of the schedules it names."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.failed_records import json_out
from tests.namespace import TestBroker
from tests.pausing import schedules_script
from tests.scheduling import every, write_schedules
from warren_cron.store.apply import field_diff

pytestmark = pytest.mark.broker


async def _apply(broker: TestBroker, own: Path, file: Path, *flags: str) -> tuple[int, str, str]:
    done = await schedules_script(broker, own, "apply", str(file), *flags)
    return done.returncode, done.stdout, done.stderr


async def _runtime(broker: TestBroker, own: Path) -> dict[str, tuple[str, int]]:
    listed = orjson.loads((await schedules_script(broker, own, "list", "--json")).stdout)
    return {r["name"]: (r["status"], r["version"]) for r in listed if r["source"] == "runtime"}


async def test_apply_creates_changes_prunes_and_leaves_runtime_schedules_alone(
    broker: TestBroker, tmp_path: Path
) -> None:
    """A dry run shows the diff and exits 1 without writing; apply writes it, attributed to
    the file; a second apply finds nothing (exit 0); --prune archives only the schedules
    the file managed, never one created at runtime."""
    own, gitops = tmp_path / "own.toml", tmp_path / "gitops.toml"
    write_schedules(broker, own, every("from-own", "1h"))
    spec = '{"name": "by-app", "every": "1h", "task": "noop"}'
    assert (await schedules_script(broker, own, "create", stdin=spec)).returncode == 0
    gitops.write_text(every("a", "1h") + every("b", "2h"))
    code, out, _ = await _apply(broker, own, gitops, "--dry-run")
    assert (code, out.split()) == (1, ["create", "a", "create", "b"])
    assert await _runtime(broker, own) == {"by-app": ("active", 1)}
    code, _, err = await _apply(broker, own, gitops)
    assert code == 0, err
    got = json_out(await schedules_script(broker, own, "get", "a", "--json"))
    assert got["history"][0]["reason"] == f"apply {gitops}" and "@" in got["history"][0]["by"]
    assert (await _apply(broker, own, gitops, "--dry-run"))[0] == 0
    gitops.write_text(every("a", "30m"))
    code, out, _ = await _apply(broker, own, gitops, "--prune", "--dry-run")
    assert (code, out.splitlines()) == (
        1,
        ["change  a", '          every: "1h" -> "30m"', "archive b"],
    )
    assert (await _apply(broker, own, gitops, "--prune"))[0] == 0
    assert await _runtime(broker, own) == {
        "a": ("active", 2),
        "b": ("archived", 2),
        "by-app": ("active", 1),
    }


async def test_one_bad_entry_or_a_conflict_changes_nothing(
    broker: TestBroker, tmp_path: Path
) -> None:
    """An invalid entry, a name of the scheduler's own file, or a schedule changed in the
    store since the last apply each exit 2 naming the problem, and nothing is written;
    --force then overwrites the store's change."""
    own, gitops = tmp_path / "own.toml", tmp_path / "gitops.toml"
    write_schedules(broker, own, every("from-own", "1h"))
    gitops.write_text(every("a", "1h"))
    assert (await _apply(broker, own, gitops))[0] == 0
    gitops.write_text(every("a", "2h") + every("new", "1h") + every("bad", "99x"))
    code, _, err = await _apply(broker, own, gitops)
    assert code == 2 and "'bad'" in err and "every" in err and "nothing applied" in err
    gitops.write_text(every("a", "2h") + every("from-own", "1h"))
    code, _, err = await _apply(broker, own, gitops)
    assert code == 2 and "from-own: the scheduler's own schedules file" in err
    changed = ("update", "a", "--if-version", "1", "--reason", "hotfix")
    assert (await schedules_script(broker, own, *changed, stdin='{"every": "5m"}')).returncode == 0
    gitops.write_text(every("a", "2h") + every("new", "1h"))
    code, _, err = await _apply(broker, own, gitops)
    assert code == 2 and "a: changed in the store since the last apply (version 1 -> 2" in err
    assert await _runtime(broker, own) == {"a": ("active", 2)}
    assert (await _apply(broker, own, gitops, "--force"))[0] == 0
    assert await _runtime(broker, own) == {"a": ("active", 3), "new": ("active", 1)}


async def test_a_runtime_schedule_named_by_the_file_is_taken_over(
    broker: TestBroker, tmp_path: Path
) -> None:
    """A schedule created at runtime that the file names is adopted (then managed by the
    file, so a later --prune archives it); one managed by another file is a conflict."""
    own, gitops, other = tmp_path / "own.toml", tmp_path / "gitops.toml", tmp_path / "other.toml"
    write_schedules(broker, own, every("from-own", "1h"))
    spec = '{"name": "rt", "every": "1h", "task": "noop"}'
    assert (await schedules_script(broker, own, "create", stdin=spec)).returncode == 0
    gitops.write_text(every("rt", "1h"))
    code, out, _ = await _apply(broker, own, gitops)
    assert (code, out.splitlines()[0]) == (0, "adopt   rt")
    other.write_text(every("rt", "1h"))
    code, _, err = await _apply(broker, own, other)
    assert code == 2 and "rt: managed by the file 'gitops.toml'" in err
    gitops.write_text("")
    assert (await _apply(broker, own, gitops, "--prune"))[0] == 0
    assert await _runtime(broker, own) == {"rt": ("archived", 3)}


def test_the_diff_of_a_payload_hides_a_webhooks_literal_credentials() -> None:
    """A changed Authorization header shows as ***, the URL change in full."""
    old = {"payload": {"url": "https://a.test/x", "headers": {"Authorization": "Bearer s3cret"}}}
    new = {"payload": {"url": "https://a.test/y", "headers": {"Authorization": "Bearer n3w"}}}
    [line] = field_diff(old, new)
    assert "s3cret" not in line and "n3w" not in line
    assert line.count("***") == 2 and "https://a.test/y" in line
