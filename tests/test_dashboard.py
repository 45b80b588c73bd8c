"""The dashboard in a real browser, over a running worker, scheduler and monitor."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from playwright.async_api import Page

from tests.api import ADMIN_ENV, TOKENS, token_settings
from tests.dashboard import (
    SCHEDULES,
    SCRIPT_TASK,
    TOKEN,
    Stack,
    act_on,
    bad,
    free_port,
    good,
    log_in,
    shot,
)
from tests.helpers import history, registry, wait_history
from tests.scheduling import write_schedules
from warren_cron.clock import utcnow
from warren_cron.faultkit.waits import eventually
from warren_cron.schedules.control import read_pauses
from warren_cron.schedules.status_rows import OVERDUE_GRACE

pytestmark = pytest.mark.broker


@pytest.fixture
async def stack(
    broker: Any, run_worker: Any, run_monitor: Any, schedulers: Any, tmp_path: Path
) -> Any:
    """Start the whole system; ``await stack(token)`` serves the dashboard (read-only
    without a token)."""

    async def start(token: str | None, **monitor_settings: Any) -> Stack:
        path = tmp_path / "schedules.toml"
        schedules = write_schedules(broker, path, SCHEDULES)
        await run_worker(registry(good=good, bad=bad))
        scheduler = await schedulers.start(path)
        monitor = await run_monitor(
            schedules=schedules.schedules,
            schedules_file=path,
            dashboard_port=free_port(),
            dashboard_token=token,
            monitor_interval_seconds=1,
            **monitor_settings,
        )
        assert monitor.dashboard is not None and monitor.dashboard.url is not None
        return Stack(broker, schedules, monitor, monitor.dashboard.url, scheduler)

    return start


async def test_every_page_shows_the_running_system_and_refuses_actions_when_read_only(
    stack: Any, page: Page
) -> None:
    """Overview, schedules, runs, a run, failed and a record show real data; a task name
    holding a script tag is shown as text; without a token every action is refused."""
    system: Stack = await stack(None)
    broken = await system.trigger("broken")
    odd = await system.trigger("odd-name")
    await system.failed_records(2)
    dashboard = system.monitor.dashboard
    assert dashboard is not None
    await eventually(lambda: dashboard.activity.workers, 20, what="an attempt of tick seen")
    activity = dashboard.activity
    await eventually(
        lambda: dict(activity.failures_by_reason(utcnow())).get("permanent-error"),
        20,
        what="the failure of broken seen in the history stream",
    )

    await page.goto(system.url)
    names = system.broker.names
    await page.get_by_title(names.main_queue, exact=True).wait_for()
    assert await page.locator("svg.chart rect").count() > 0
    assert await page.get_by_role("cell", name=socket.gethostname()).count() >= 1
    assert await page.get_by_role("cell", name="permanent-error").count() == 1
    await shot(page, "overview")

    await page.goto(system.url + "schedules")
    assert await page.locator("tr[data-schedule]").count() == 4
    tick = page.locator('tr[data-schedule="tick"]')
    await tick.get_by_text("succeeded").wait_for()
    assert await page.get_by_role("button", name="Pause").count() == 0  # read-only
    await shot(page, "schedules")

    await page.goto(system.url + "failed")
    await page.get_by_text(SCRIPT_TASK, exact=True).wait_for()
    assert await page.locator("main script").count() == 0
    assert "pwned" not in await page.title()
    await shot(page, "failed")

    await page.get_by_role("link", name=odd).click()
    await page.locator("dd", has_text=SCRIPT_TASK).first.wait_for()
    await page.get_by_text("unknown-task").first.wait_for()
    assert "pwned" not in await page.title()
    await shot(page, "record")

    await page.goto(system.url + "runs/" + broken)
    timeline = page.locator("ol.timeline")
    await timeline.get_by_text("triggered").wait_for()
    await timeline.get_by_text("attempt 1").wait_for()
    await timeline.get_by_text("the database said no").first.wait_for()
    await shot(page, "run")

    await page.goto(system.url + "runs?schedule=tick")
    await page.get_by_role("link", name="tick@", exact=False).first.wait_for()
    await shot(page, "runs")

    refused = await page.request.post(system.url + "schedules/nightly/pause", form={"why": "try"})
    assert refused.status == 403
    assert "read-only" in await refused.text()
    assert await read_pauses(system.broker.connection, names) == {}


async def test_the_overview_says_first_when_no_scheduler_leads_and_next_fires_turn_overdue(
    stack: Any, schedulers: Any, page: Page
) -> None:
    """The scheduler line leads the overview: who leads, then DOWN in red once the only
    scheduler stops; the schedules page shows tick's next fire overdue; a scheduler started
    again leads once more."""
    system: Stack = await stack(None, scheduler_down_seconds=1)
    watch = system.monitor.schedulers
    await eventually(lambda: watch.view is not None and watch.view.leading, 20, what="a leader")
    await page.goto(system.url)
    first = page.locator("main .card").first
    assert await first.get_attribute("id") == "scheduler"
    assert " leads (no standby); last fire " in await first.inner_text()
    await schedulers.stop(system.scheduler)
    # A stopping scheduler's last beat says it leaves before its lock goes: until the broker
    # drops that consumer the queue reads held, and the line SILENT, firing too.
    await eventually(
        lambda: watch.firing and watch.view is not None and not watch.view.held,
        20,
        what="scheduler.down firing, the leader queue free",
    )
    await page.reload()
    assert (await first.inner_text()).startswith("scheduler: DOWN: no scheduler leads")
    assert "bad" in (await first.get_attribute("class") or "")
    await shot(page, "overview-scheduler-down")

    tick = system.monitor.keeper.fold.state("tick")
    due = tick.last_fire_at
    assert due is not None
    await asyncio.sleep(
        max(0.0, (due - utcnow()).total_seconds() + OVERDUE_GRACE.total_seconds() + 1.5)
    )
    # The overview reloads itself every few seconds, and a navigation begun as it reloads is
    # interrupted (seen on a loaded CI lane): the schedules page opens in a page of its own.
    page = await page.context.new_page()
    await page.goto(system.url + "schedules")
    next_fire = page.locator('tr[data-schedule="tick"] .badge.bad')
    assert (await next_fire.inner_text()).startswith("overdue ")
    await shot(page, "schedules-overdue")

    await schedulers.start(Path(system.schedules.source))
    await eventually(lambda: not watch.firing, 30, what="scheduler.down resolved")
    await page.goto(system.url)
    assert " leads " in await page.locator("#scheduler").inner_text()


async def test_trigger_pause_and_resume_by_clicks_change_the_broker_and_the_history(
    stack: Any, page: Page
) -> None:
    """A logged-in user's clicks pause and resume a schedule in the control stream and
    trigger a run; each action is in the history with who and why; a form without the
    session's CSRF token, or from another site, is refused."""
    system: Stack = await stack(TOKEN)
    await log_in(page, system.url)
    await page.goto(system.url + "schedules")
    names = system.broker.names

    await act_on(page, "nightly", "Pause", "db migration")
    await page.locator("p.note").get_by_text("paused nightly").wait_for()
    pause = (await read_pauses(system.broker.connection, names))["nightly"]
    assert (pause.reason, pause.by) == ("db migration", "alice@dashboard (127.0.0.1)")
    await page.locator('tr[data-schedule="nightly"]').get_by_text("db migration").wait_for()
    await shot(page, "schedules-paused")

    await act_on(page, "nightly", "Resume", "migration done")
    await page.locator("p.note").get_by_text("resumed nightly").wait_for()
    assert "nightly" not in await read_pauses(system.broker.connection, names)

    await act_on(page, "broken", "Trigger now", "checking the fix")
    await page.locator("p.note").get_by_text("triggered broken: run broken@manual-").wait_for()
    await system.failed_records(1)
    events = await wait_history(
        system.broker,
        lambda found: {"paused", "resumed", "triggered"} <= {e.type for e in found},
        "the three actions in the history",
    )
    acts = {e.type: e for e in events if e.type in ("paused", "resumed", "triggered")}
    assert {e.get("by") for e in acts.values()} == {"alice@dashboard (127.0.0.1)"}
    assert acts["resumed"].get("reason") == "migration done"
    assert acts["triggered"].get("reason") == "checking the fix"

    forged = await page.request.post(
        system.url + "schedules/nightly/pause", form={"why": "x", "csrf": "guess"}
    )
    assert forged.status == 403 and "out of date" in await forged.text()
    csrf = await page.locator('input[name="csrf"]').first.get_attribute("value")
    elsewhere = await page.request.post(
        system.url + "schedules/nightly/pause",
        form={"why": "x", "csrf": csrf or ""},
        headers={"Origin": "http://evil.example"},
    )
    assert elsewhere.status == 403
    assert "nightly" not in await read_pauses(system.broker.connection, names)

    # A client with the token in a header needs no session and gets a line of text back.
    async with aiohttp.ClientSession() as client:
        pause_url = system.url + "schedules/tick/pause"
        async with client.post(pause_url, data={"why": "from a script"}) as anonymous:
            assert anonymous.status == 403
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        async with client.post(pause_url, data={"why": "from a script"}, headers=bearer) as api:
            assert api.status == 200 and (await api.text()).startswith("paused tick")
    tick = (await read_pauses(system.broker.connection, names))["tick"]
    assert (tick.by, tick.reason) == ("api@dashboard (127.0.0.1)", "from a script")


async def test_replay_and_purge_by_clicks_move_failed_records_after_a_counted_confirmation(
    stack: Any, page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record's detail hides its secret header; replaying one record (an operator) and
    purging a filter's matches (an admin, as on the API: the operator is shown no purge)
    each show the count first, then move exactly those records."""
    monkeypatch.setenv(ADMIN_ENV, TOKENS["admin"])
    system: Stack = await stack(TOKEN, api_tokens=token_settings())
    runs = [await system.trigger("broken") for _ in range(3)]
    await system.failed_records(3)
    await log_in(page, system.url)

    await page.goto(system.url + "failed?text=" + runs[0])
    await page.get_by_role("link", name=runs[0]).click()
    await page.get_by_text("***").first.wait_for()
    assert "hunter2" not in await page.content()
    await page.get_by_role("link", name="Replay…").click()
    assert await page.locator("#count").inner_text() == "1"
    await shot(page, "confirm-replay")
    await page.get_by_label("Why?").fill("fixed the database")
    await page.get_by_role("button", name="Replay 1 record(s)").click()
    await page.locator("p.note").get_by_text("replayed 1 of 1 record(s)").wait_for()
    replayed = await wait_history(
        system.broker,
        lambda found: any(e.type == "replayed" for e in found),
        "a replayed event",
    )
    [event] = [e for e in replayed if e.type == "replayed"]
    assert (event.run_id, event.get("by")) == (runs[0], "alice@dashboard (127.0.0.1)")
    assert event.get("reason") == "fixed the database"
    # The replayed task fails again (its handler still does): three records, one replayed.
    await system.failed_records(3)

    # The dashboard's own token is an operator's: no purge button, no purge form.
    await page.goto(system.url + "failed?schedule=broken")
    await page.get_by_role("link", name="Replay 3 matching…").wait_for()
    assert await page.get_by_role("link", name="Purge 3 matching…").count() == 0
    await page.goto(system.url + "failed/confirm?action=purge&schedule=broken")
    await page.get_by_text("whose role may not purge").wait_for()
    assert await page.get_by_role("button", name="Purge 3 record(s)").count() == 0
    assert await system.broker.depth(system.broker.names.failed_queue) == 3
    await log_in(page, system.url, token=TOKENS["admin"])
    await page.goto(system.url + "failed?schedule=broken")
    await page.get_by_role("link", name="Purge 3 matching…").click()
    assert await page.locator("#count").inner_text() == "3"
    await page.get_by_label("Why?").fill("not needed any more")
    await page.get_by_role("button", name="Purge 3 record(s)").click()
    await page.locator("p.note").get_by_text("purged 3 of 3 record(s)").wait_for()
    assert await system.broker.depth(system.broker.names.failed_queue) == 0
    await page.get_by_text("no record matches").wait_for()
    purged = [e for e in await history(system.broker) if e.type == "purged"]
    assert sorted(str(e.run_id) for e in purged) == sorted(runs)
    assert {e.get("reason") for e in purged} == {"not needed any more"}
