"""The schedule operations every surface calls: pause and resume wait for the monitor's views
of the control stream, writes are told to the history when asked, and the API's and the
pages' modules for schedules call them without importing each other."""

from __future__ import annotations

import ast
import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from tests.namespace import TestBroker
from tests.pausing import wait_events
from warren_cron.clock import utcnow
from warren_cron.errors import NameTaken
from warren_cron.history.publisher import HistoryPublisher, publishing
from warren_cron.ops import schedule_actions as actions
from warren_cron.ops import schedule_apply as apply_ops
from warren_cron.ops import schedule_writes as writes
from warren_cron.schedules.control import Pause
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.admin import ScheduleAdmin
from warren_cron.store.apply import Options

TOPOLOGY = Path(__file__).resolve().parent.parent / "topology"
API = TOPOLOGY / "monitor" / "api" / "schedules.py"
PAGES = [
    TOPOLOGY / "monitor" / "dashboard" / "pages" / n for n in ("schedules.py", "schedule_forms.py")
]
OPS = sorted((TOPOLOGY / "ops").glob("schedule*.py"))


def imported(path: Path) -> set[str]:
    """The modules a source file imports, by their full name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_the_api_and_the_pages_of_schedules_do_not_import_each_other() -> None:
    """The schedules' endpoints and pages are sibling adapters over the operations."""
    assert not {m for m in imported(API) if m.startswith("warren_cron.monitor.dashboard")}
    for page in PAGES:
        assert not {m for m in imported(page) if m.startswith("warren_cron.monitor.api")}, page


def test_the_schedule_operations_know_no_surface() -> None:
    """No web server, template, command line or adapter module below the surfaces."""
    banned = ("aiohttp", "jinja2", "argparse", "warren_cron.monitor", "warren_cron.cli")
    assert len(OPS) >= 5
    for path in OPS:
        assert not {m for m in imported(path) if m.startswith(banned)}, path


class View:
    """A view of the control stream that folds a pause when told to."""

    def __init__(self) -> None:
        self.held: dict[str, Pause] = {}
        self.changed = asyncio.Event()

    @property
    def pauses(self) -> Mapping[str, Pause]:
        """The pauses this view holds."""
        return self.held

    @property
    def pauses_changed(self) -> asyncio.Event:
        """Set when the view folds a change."""
        return self.changed


async def test_followed_returns_once_every_view_holds_the_pause() -> None:
    """A slow view is waited for; a view that never follows gives up at the deadline."""
    fast, slow = View(), View()
    fast.held["nightly"] = Pause("deploy", "ops", utcnow())

    async def later() -> None:
        await asyncio.sleep(0)
        slow.held["nightly"] = fast.held["nightly"]
        slow.changed.set()

    task = asyncio.create_task(later())
    assert await actions.followed([fast, slow], "nightly", paused=True)
    await task
    assert not await actions.followed([fast, View()], "nightly", paused=True, seconds=0.05)


@pytest.fixture
async def monitored(broker: TestBroker) -> AsyncIterator[tuple[ScheduleAdmin, HistoryPublisher]]:
    """A store's view of the control stream, and a history publisher, in the namespace."""
    settings = broker.settings()
    admin = ScheduleAdmin(settings)
    await admin.start(broker.connection)
    async with publishing(broker.connection, broker.names, settings, "test") as history:
        yield admin, history
    await admin.close()


async def test_a_pause_and_a_resume_return_once_the_view_holds_them(
    broker: TestBroker, monitored: tuple[ScheduleAdmin, HistoryPublisher]
) -> None:
    """After a pause the view reads it paused, a second pause says since when and by whom,
    and after a resume the view reads it running; a second resume sends nothing."""
    admin, history = monitored
    conn, names = broker.connection, broker.names
    paused = await actions.pause_schedule(
        conn, names, "nightly", history, "ops", "deploy", views=[admin]
    )
    assert paused.changed and "nightly" in admin.pauses
    again = await actions.pause_schedule(conn, names, "nightly", history, "bob", "x", views=[admin])
    assert again.already is not None and (again.already.by, again.already.reason) == (
        "ops",
        "deploy",
    )
    resumed = await actions.resume_schedule(conn, names, "nightly", history, "ops", views=[admin])
    assert resumed.changed and "nightly" not in admin.pauses
    assert not (await actions.resume_schedule(conn, names, "nightly", history, "ops")).changed


async def test_a_write_is_told_to_the_history_only_when_asked(
    broker: TestBroker, monitored: tuple[ScheduleAdmin, HistoryPublisher]
) -> None:
    """A write with ``audit_to`` is a ``changed`` event naming who made it; one without
    (the command's, the client's) is kept in the schedule's own history alone."""
    admin, history = monitored
    fields = {"name": "report", "every": "1h", "task": "noop"}
    made = await writes.create_schedule(admin, fields, "cli", "quiet")
    archived = await writes.archive_schedule(
        admin, "report", made.version, "alice", "done", audit_to=history
    )
    # One publisher sends in order: once the archive's event is in, a create's would be too.
    await wait_events(broker, 1, type="changed", change="archive")
    [changed] = await wait_events(broker, 1, type="changed")
    assert (changed.get("by"), changed.get("change"), changed.get("version")) == (
        "alice",
        "archive",
        archived.version,
    )
    assert [item["kind"] for item in archived.history] == ["create", "archive"]


async def test_an_apply_cut_short_by_another_writer_says_how_far_it_got(
    monitored: tuple[ScheduleAdmin, HistoryPublisher],
) -> None:
    """A change written by someone else between the plan and its step stops the apply
    there: the changes before it stay, and the error counts them."""
    admin, _ = monitored
    specs = [ScheduleSpec(name=name, every="1h", task="noop") for name in ("a-first", "b-next")]
    plan = await apply_ops.planned_apply(admin, specs, Options("deploy.toml", frozenset()))
    await writes.create_schedule(admin, {"name": "b-next", "every": "2h", "task": "noop"}, "bob")
    with pytest.raises(apply_ops.ApplyCut) as cut:
        await apply_ops.apply_plan(admin, plan, "deploy.toml", "ci", "apply deploy.toml")
    assert (cut.value.written, cut.value.total) == (1, 2)
    assert isinstance(cut.value.error, NameTaken)
    assert (await admin.get("a-first")).manager == "deploy.toml"
