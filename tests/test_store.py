"""Runtime schedules through the client: versions, history, conflicts and bad input."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.namespace import TestBroker
from warren_cron.client import Client, SyncClient
from warren_cron.errors import (
    InvalidSchedule,
    NameTaken,
    ScheduleNotFound,
    VersionConflict,
)
from warren_cron.history.reader import read_messages
from warren_cron.store import streams

pytestmark = pytest.mark.broker


def spec(name: str = "report-42", **fields: Any) -> dict[str, Any]:
    """A runtime schedule's fields, as an application sends them."""
    return {"name": name, "every": "1h", "task": "noop", **fields}


async def changes_in_log(broker: TestBroker) -> int:
    """How many change messages the store's log holds (markers and notes left out)."""
    found = 0
    async for _, body in read_messages(broker.connection, broker.names.store_log):
        found += streams.read_change(body) is not None
    return found


async def test_a_created_schedule_reads_back_with_its_version_status_and_history(
    client: Client,
) -> None:
    """create, update and archive each make a version, attributed, in the history."""
    made = await client.create_schedule(spec(), by="signup", reason="customer 42")
    assert (made.version, made.status, made.spec.every) == (1, "active", "1h")
    changed = await client.update_schedule("report-42", {"every": "2h"}, version=1, by="ops")
    archived = await client.archive_schedule("report-42", by="ops", reason="churned")
    got = await client.get_schedule("report-42")
    assert (changed.spec.every, archived.status, got.version, got.status) == (
        "2h",
        "archived",
        3,
        "archived",
    )
    assert [(h["kind"], h["version"], h["previous"], h["by"]) for h in got.history] == [
        ("create", 1, 0, "signup"),
        ("update", 2, 1, "ops"),
        ("archive", 3, 2, "ops"),
    ]
    assert [h["reason"] for h in got.history] == ["customer 42", None, "churned"]
    assert [s.name for s in await client.list_schedules()] == ["report-42"]


async def test_of_two_clients_updating_the_same_version_exactly_one_wins(
    broker: TestBroker, client: Client
) -> None:
    """Two racing updates based on version 1: one applies, the other raises a conflict
    naming the version it read and the one now current."""
    await client.create_schedule(spec(), by="app")
    async with Client(broker.settings()) as other:
        results = await asyncio.gather(
            client.update_schedule("report-42", {"every": "5m"}, version=1, by="a"),
            other.update_schedule("report-42", {"every": "7m"}, version=1, by="b"),
            return_exceptions=True,
        )
        [conflict] = [r for r in results if isinstance(r, BaseException)]
        [winner] = [r for r in results if not isinstance(r, BaseException)]
        assert isinstance(conflict, VersionConflict), conflict
        assert (conflict.expected, conflict.current) == (1, 2)
        assert "version 1" in str(conflict) and "version=2" in str(conflict)
        seen = await other.get_schedule("report-42")
    assert (seen.version, seen.spec.every) == (2, winner.spec.every)


async def test_a_live_name_cannot_be_created_twice_but_an_archived_one_can(
    client: Client,
) -> None:
    """create of a live schedule's name raises NameTaken; after archive it makes version 3."""
    await client.create_schedule(spec(), by="app")
    with pytest.raises(NameTaken, match="update it, or archive it first"):
        await client.create_schedule(spec(), by="app")
    await client.archive_schedule("report-42", by="app")
    again = await client.create_schedule(spec(every="5m"), by="app")
    assert (again.version, again.status) == (3, "active")
    with pytest.raises(ScheduleNotFound, match="no runtime schedule 'nope'"):
        await client.update_schedule("nope", {"every": "1m"}, version=1)


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        (spec(cron="61 * * * *", every=None), "cron"),
        (spec(colour="blue"), "colour: unknown field; known fields: name, cron"),
        (spec(payload={"blob": "x" * 10_000_000}), "over 65536"),
        (spec(name="has space"), "name"),
        (spec(every=None), "give exactly one of them"),
    ],
)
async def test_bad_input_gets_a_clear_error_and_writes_nothing(
    broker: TestBroker, client: Client, bad: dict[str, Any], says: str
) -> None:
    """An invalid cron, an unknown field, a 10 MB spec, a bad name, no timing: refused
    before anything reaches the log."""
    with pytest.raises(InvalidSchedule, match=says):
        await client.create_schedule({k: v for k, v in bad.items() if v is not None})
    assert await client.list_schedules() == []
    assert await changes_in_log(broker) == 0


async def test_a_bad_update_changes_nothing(broker: TestBroker, client: Client) -> None:
    """An update to an invalid timing, or a rename, is refused; the schedule stays at v1."""
    await client.create_schedule(spec(), by="app")
    with pytest.raises(InvalidSchedule, match="every"):
        await client.update_schedule("report-42", {"every": "soon"}, version=1)
    with pytest.raises(InvalidSchedule, match="cannot be renamed"):
        await client.update_schedule("report-42", {"name": "other"}, version=1)
    assert (await client.get_schedule("report-42")).version == 1
    assert await changes_in_log(broker) == 1


async def test_a_runtime_schedule_cannot_take_a_file_schedules_name(
    broker: TestBroker, tmp_path: Path
) -> None:
    """The file's names are the file's: create says to change it in the file."""
    path = tmp_path / "schedules.toml"
    path.write_text('[[schedule]]\nname = "nightly"\nevery = "1d"\ntask = "noop"\n')
    async with Client(broker.settings(schedules_file=path)) as client:
        with pytest.raises(NameTaken, match=f"defined in {path}: change it there"):
            await client.create_schedule(spec("nightly"))
        with pytest.raises(ScheduleNotFound, match="change it there"):
            await client.get_schedule("nightly")


def test_the_sync_client_creates_and_reads_schedules(broker: TestBroker) -> None:
    """SyncClient's schedule methods work from a thread without an event loop."""
    with SyncClient(broker.settings()) as client:
        made = client.create_schedule(spec(), by="script")
        assert client.get_schedule("report-42").version == made.version == 1
        assert [s.status for s in client.list_schedules()] == ["active"]
