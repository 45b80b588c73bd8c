"""The leading scheduler applies its own schedules file to the store, as ``warren schedules
apply FILE --prune`` would, when it starts leading and after each reload."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from tests.namespace import TestBroker
from tests.scheduling import Schedulers, every, fire_times, write_schedules
from warren_cron.client import Client
from warren_cron.errors import NameTaken
from warren_cron.faultkit.waits import eventually
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.admin import ScheduleAdmin
from warren_cron.store.apply import SCHEDULER_FILE, Step
from warren_cron.store.book import StoreBook
from warren_cron.store.changes import Change, Entry

pytestmark = pytest.mark.broker


@pytest.fixture
async def admin(broker: TestBroker) -> AsyncIterator[ScheduleAdmin]:
    """The store of the test's namespace, read and written as the command does."""
    store = ScheduleAdmin(broker.settings())
    await store.start(broker.connection)
    yield store
    await store.close()


Row = tuple[str, str | None, str | None]


def state(entries: dict[str, Entry]) -> dict[str, Row]:
    """Each entry's status, manager and timing, by name."""
    return {
        name: (entry.status, entry.manager, entry.spec.every)
        for name, entry in sorted(entries.items())
    }


async def test_a_reload_applies_the_file_and_leaves_runtime_schedules_alone(
    broker: TestBroker,
    client: Client,
    schedulers: Schedulers,
    admin: ScheduleAdmin,
    tmp_path: Path,
) -> None:
    """On leading, the file's schedules land in the store managed by CRON_SCHEDULES_FILE (a
    runtime one it names is adopted; one another file manages is a logged conflict, the rest
    still applied); a reload that changes one and drops another updates and archives them;
    a runtime schedule the file never names keeps its version; nothing fires twice."""
    path = tmp_path / "schedules.toml"
    await client.create_schedule({"name": "rt", "every": "1h", "task": "noop"})
    await client.create_schedule({"name": "adopted", "every": "1h", "task": "noop"})
    theirs = ScheduleSpec(name="theirs", every="1h", task="noop")
    await admin.apply_step(Step("create", "theirs", 0, theirs), "other.toml", "ops@test", None)
    text = every("tick", "1s") + every("b", "1h") + every("adopted", "2h") + every("theirs", "2h")
    write_schedules(broker, path, text)
    with capture_logs() as logs:
        scheduler = await schedulers.start(path)
        expected: dict[str, Row] = {
            "adopted": ("active", SCHEDULER_FILE, "2h"),
            "b": ("active", SCHEDULER_FILE, "1h"),
            "rt": ("active", None, "1h"),
            "theirs": ("active", "other.toml", "1h"),
            "tick": ("active", SCHEDULER_FILE, "1s"),
        }
        await eventually(
            lambda: _matches(admin, expected), 15, what="the file applied to the store"
        )
    [conflict] = [e for e in logs if e["event"].startswith("schedule of the file not applied")]
    assert "theirs: managed by the file 'other.toml'" in conflict["conflict"]

    write_schedules(broker, path, every("tick", "1s") + every("adopted", "3h"))
    assert scheduler.reload()
    expected.update(adopted=("active", SCHEDULER_FILE, "3h"), b=("archived", SCHEDULER_FILE, "1h"))
    await eventually(lambda: _matches(admin, expected), 15, what="the reload applied")
    got = await admin.get("adopted")
    assert [h["kind"] for h in got.history] == ["create", "update", "update"]
    assert all(h["by"].startswith("scheduler ") for h in got.history[1:])
    assert got.history[-1]["reason"] == f"reload of {path}"
    assert (await admin.get("rt")).version == 1

    async def three_fires() -> bool:
        return len(await fire_times(broker, "tick")) >= 3

    await eventually(three_fires, 15, what="three fires of tick")
    twice = [t for t, n in Counter(await fire_times(broker, "tick")).items() if n > 1]
    assert twice == [], "the store's copy of a file schedule must not fire as well"


async def test_the_stores_copy_of_a_file_schedule_cannot_be_changed_at_runtime(
    broker: TestBroker,
    client: Client,
    schedulers: Schedulers,
    admin: ScheduleAdmin,
    tmp_path: Path,
) -> None:
    """An update or archive of a schedule the scheduler's file manages is refused, saying
    to change the file; the list shows it once, as the file's."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("nightly", "1h"))
    await schedulers.start(path)
    await eventually(lambda: _matches(admin, {"nightly": ("active", SCHEDULER_FILE, "1h")}), 15)
    got = await client.get_schedule("nightly")
    with pytest.raises(NameTaken, match="CRON_SCHEDULES_FILE: change it there"):
        await client.update_schedule("nightly", {"every": "2h"}, version=got.version)
    with pytest.raises(NameTaken, match="CRON_SCHEDULES_FILE"):
        await client.archive_schedule("nightly", reason="try")
    assert got.from_file and got.to_json()["manager"] == SCHEDULER_FILE


async def _matches(admin: ScheduleAdmin, expected: Mapping[str, Row]) -> bool:
    return state(await admin.entries()) == expected


async def test_an_invalid_file_on_reload_leaves_the_store_as_it_was(
    broker: TestBroker, schedulers: Schedulers, admin: ScheduleAdmin, tmp_path: Path
) -> None:
    """A reload of a file that does not validate is rejected whole: nothing is archived or
    changed in the store, and the next valid reload applies again."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("kept", "1h") + every("other", "1h"))
    scheduler = await schedulers.start(path)
    both: dict[str, Row] = {
        "kept": ("active", SCHEDULER_FILE, "1h"),
        "other": ("active", SCHEDULER_FILE, "1h"),
    }
    await eventually(lambda: _matches(admin, both), 15, what="the file applied")
    path.write_text(every("kept", "1h") + '[[schedule]]\nname = "broken"\nevery = "soon"\n')
    assert not scheduler.reload()
    assert state(await admin.entries()) == both
    write_schedules(broker, path, every("kept", "2h"))
    assert scheduler.reload()
    after: dict[str, Row] = {
        "kept": ("active", SCHEDULER_FILE, "2h"),
        "other": ("archived", SCHEDULER_FILE, "1h"),
    }
    await eventually(lambda: _matches(admin, after), 15, what="the valid reload applied")


async def test_a_file_of_10000_schedules_is_written_to_the_store_in_bulk(
    broker: TestBroker,
    schedulers: Schedulers,
    admin: ScheduleAdmin,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The leader writes a file's 10,000 schedules with many changes in flight at once (as
    a bulk create does), not one round trip after another, and the store holds every one,
    managed by the file."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, "".join(every(f"s{n:05d}", "1h") for n in range(10_000)))
    in_flight, most = 0, 0
    append = StoreBook.append

    async def counted(book: StoreBook, change: Change, spec: ScheduleSpec | None = None) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            await append(book, change, spec)
        finally:
            in_flight -= 1

    monkeypatch.setattr(StoreBook, "append", counted)
    with capture_logs() as logs:
        await schedulers.start(path)

        def applied() -> bool:
            return any(e["event"] == "schedules file applied to the store" for e in logs)

        await eventually(applied, 120, what="the file of 10,000 applied")
    entries = await admin.entries()
    managed = [e for e in entries.values() if e.manager == SCHEDULER_FILE]
    assert len(managed) == 10_000 and all(e.status == "active" for e in managed)
    assert most >= 16, f"at most {most} changes in flight: written one after another"
