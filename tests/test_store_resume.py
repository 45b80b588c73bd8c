"""A reader of the runtime schedules started again (a scheduler leading again after a lost
lease or connection) reads only the log after what it holds, and reads everything anew when
that log is gone."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.namespace import TestBroker
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store import book as book_module
from warren_cron.store.book import StoreBook
from warren_cron.store.changes import Change, spec_json

pytestmark = pytest.mark.broker


async def create(book: StoreBook, name: str) -> None:
    """Create the runtime schedule ``name`` through ``book``."""
    spec = ScheduleSpec.model_validate({"name": name, "every": "1h", "task": "noop"})
    await book.append(Change("create", name, 0, "app", "signup", spec_json(spec)), spec)


def snapshot_reads(monkeypatch: pytest.MonkeyPatch) -> list[StoreBook]:
    """Each book that reads the snapshot from now on, once per read."""
    reads: list[StoreBook] = []
    read = StoreBook._read_snapshot

    async def counted(self: StoreBook) -> None:
        reads.append(self)
        await read(self)

    monkeypatch.setattr(StoreBook, "_read_snapshot", counted)
    return reads


@pytest.fixture
async def books(broker: TestBroker) -> AsyncIterator[Callable[[], StoreBook]]:
    """New books on the test's namespace, each closed after the test (again, if it did)."""
    made: list[StoreBook] = []

    def book() -> StoreBook:
        made.append(StoreBook(broker.names))
        return made[-1]

    yield book
    for each in made:
        await each.close()


def statuses(book: StoreBook) -> dict[str, Any]:
    """Each schedule's status and version, as ``book`` holds them."""
    return {name: (e.status, e.version) for name, e in book.state.entries.items()}


async def test_a_book_started_again_reads_only_the_changes_made_while_it_was_away(
    broker: TestBroker, books: Callable[[], StoreBook], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closed, then started again after creates, an archive and a newer snapshot, a book
    folds the log after its offset (no snapshot read), holds what the writer holds, and
    follows the log live again."""
    reader, writer = books(), books()
    await writer.start(broker.connection)
    assert await reader.start(broker.connection) is True
    for name in ("a", "b", "c"):
        await create(writer, name)
    await reader.sync()
    await reader.close()
    await create(writer, "late")
    await writer.append(Change("archive", "b", 1, "ops", "gone"))
    await writer.write_snapshot()  # newer than the reader: a read anew would take it
    reads = snapshot_reads(monkeypatch)
    assert await reader.start(broker.connection) is False
    assert reads == [] and statuses(reader) == statuses(writer)
    assert statuses(reader)["b"] == ("archived", 2)
    await create(writer, "after")
    await reader.sync()
    assert "after" in reader.state.entries


async def test_a_book_whose_log_was_made_anew_reads_it_all_again(
    broker: TestBroker, books: Callable[[], StoreBook], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A book started again after its namespace's log and snapshot were deleted and made
    anew (with fewer messages than it had read) reads the new log whole: it holds the new
    schedule, not the old ones, and does not wait for a marker that never comes."""
    reader = books()
    await reader.start(broker.connection)
    for name in ("a", "b", "c", "d"):
        await create(reader, name)
    await reader.close()
    channel = await broker.channel()
    for queue in (broker.names.store_log, broker.names.store_snapshot):
        await channel.queue_delete(queue)
    writer = books()
    await writer.start(broker.connection)
    await create(writer, "new")
    reads = snapshot_reads(monkeypatch)
    assert await reader.start(broker.connection) is True
    assert reads == [reader] and statuses(reader) == {"new": ("active", 1)}
    await create(writer, "newer")
    await reader.sync()
    assert set(reader.state.entries) == {"new", "newer"}


async def test_a_snapshot_is_written_once_the_log_past_the_last_holds_its_bytes_bound(
    broker: TestBroker, books: Callable[[], StoreBook], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Far short of the changes that make one due by count, a writer whose log past the
    newest snapshot holds ``SNAPSHOT_BYTES`` writes a snapshot (retention could otherwise
    drop changes no snapshot holds), and counts again from it."""
    monkeypatch.setattr(book_module, "SNAPSHOT_EVERY", 1_000_000)
    monkeypatch.setattr(book_module, "SNAPSHOT_BYTES", 2_000)
    writer = books()
    await writer.start(broker.connection)
    for n in range(3):
        await create(writer, f"s{n}")
    assert writer.state.snapshot_offset < 0  # three changes hold under 2,000 bytes
    for n in range(3, 20):  # a create's message is about 400 bytes
        await create(writer, f"s{n}")
        if writer.state.snapshot_offset >= 0:
            break
    assert writer.state.snapshot_offset >= 0, "no snapshot by 20 creates"
    snapped = len(writer.state.entries)
    await create(writer, "after")
    assert writer.state.snapshot_offset < writer.state.offset  # counting from it again
    reader = books()
    await reader.start(broker.connection)
    assert set(reader.state.entries) == set(writer.state.entries) and snapped > 3
