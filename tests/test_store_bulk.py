"""Many runtime schedules at once: ``create_schedules`` keeps versions right when writers
race, and a snapshot that cannot be read costs a reader time, never its schedules."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.namespace import TestBroker
from warren_cron.broker.connect import publish_channel
from warren_cron.client import Client, SyncClient
from warren_cron.errors import InvalidSchedule, NameTaken
from warren_cron.store import book
from warren_cron.store.stored import StoredSchedule
from warren_cron.store.streams import snapshot_store

pytestmark = pytest.mark.broker


def spec(name: str, **fields: Any) -> dict[str, Any]:
    """A runtime schedule's fields, as an application sends them."""
    return {"name": name, "every": "1h", "task": "noop", **fields}


async def test_create_schedules_makes_each_once_in_order(client: Client) -> None:
    """300 creates in flight together: each at version 1, returned in the order given,
    and a name already live is that item's NameTaken while the rest apply."""
    await client.create_schedule(spec("n-0007"), by="app")
    made = await client.create_schedules([spec(f"n-{i:04d}") for i in range(300)], by="bulk")
    [refused] = [item for item in made if not isinstance(item, StoredSchedule)]
    assert isinstance(refused, NameTaken) and "'n-0007' exists" in str(refused)
    created = [item for item in made if isinstance(item, StoredSchedule)]
    assert [s.name for s in created] == [f"n-{i:04d}" for i in range(300) if i != 7]
    assert {(s.version, s.status) for s in created} == {(1, "active")}
    listed = await client.list_schedules()
    assert len(listed) == 300 and {s.history[-1]["by"] for s in listed} == {"app", "bulk"}


async def test_two_clients_creating_the_same_names_each_name_is_made_once(
    broker: TestBroker, client: Client
) -> None:
    """Two create_schedules racing over the same 100 names: every name is won by exactly
    one of them, and the other gets NameTaken for it."""
    names = [f"race-{i:03d}" for i in range(100)]
    async with Client(broker.settings()) as other:
        mine, theirs = await asyncio.gather(
            client.create_schedules([spec(n) for n in names], by="a"),
            other.create_schedules([spec(n, every="2h") for n in names], by="b"),
        )
        for one, two in zip(mine, theirs, strict=True):
            won = [item for item in (one, two) if isinstance(item, StoredSchedule)]
            lost = [item for item in (one, two) if isinstance(item, NameTaken)]
            assert (len(won), len(lost), won[0].version) == (1, 1, 1)
        listed = {s.name: s for s in await other.list_schedules()}
    assert {s.version for s in listed.values()} == {1} and listed.keys() == set(names)


async def test_one_bad_spec_writes_none_of_them(client: Client) -> None:
    """An invalid spec, or a name given twice, is refused before anything is written."""
    with pytest.raises(InvalidSchedule, match=r"'bad'.*cron"):
        await client.create_schedules([spec("good"), spec("bad", every=None, cron="61 * * * *")])
    with pytest.raises(InvalidSchedule, match="given twice"):
        await client.create_schedules([spec("twice"), spec("twice")])
    assert await client.list_schedules() == []


def test_the_sync_client_creates_many(broker: TestBroker) -> None:
    """SyncClient.create_schedules works from a thread without an event loop."""
    with SyncClient(broker.settings()) as client:
        made = client.create_schedules([spec("a"), spec("b")], by="script")
        assert [s.name for s in made if isinstance(s, StoredSchedule)] == ["a", "b"]


async def test_an_unreadable_snapshot_is_passed_over_for_the_whole_log(
    broker: TestBroker, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot overwritten with garbage: a new reader says so and folds every change of
    the log instead, and has every schedule."""
    monkeypatch.setattr(book, "SNAPSHOT_EVERY", 5)
    await client.create_schedules([spec(f"k-{i}") for i in range(12)], by="app")
    channel = await publish_channel(broker.connection)
    store = await snapshot_store(channel, broker.names)
    await store.write(b"\x78\x9c not a snapshot")
    await channel.close()
    async with Client(broker.settings()) as reader:
        listed = await reader.list_schedules()
    assert [s.name for s in listed] == sorted(f"k-{i}" for i in range(12))
