"""The dashboard's forms for runtime schedules in a real browser, over a running worker,
scheduler and monitor: create, edit, archive; conflicts, roles and hostile input."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Page

from tests.api import ADMIN_ENV, TOKENS, token_settings
from tests.dashboard import SCHEDULES, SCRIPT_TASK, TOKEN, Stack, bad, free_port, good, shot
from tests.helpers import registry, wait_history
from tests.scheduling import write_schedules
from warren_cron.errors import ScheduleNotFound
from warren_cron.store.admin import ScheduleAdmin
from warren_cron.store.masking import MASK

pytestmark = pytest.mark.broker
BY = "deployer@dashboard (127.0.0.1)"
SECRET = "Bearer s3cr3t-0123456789abcdef"
Start = Callable[[], Awaitable[Stack]]


@pytest.fixture
async def forms(
    broker: Any,
    run_worker: Any,
    run_monitor: Any,
    schedulers: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Start:
    """``await forms()``: the whole system, the dashboard with its token and the API's."""
    monkeypatch.setenv(ADMIN_ENV, TOKENS["admin"])

    async def start() -> Stack:
        path = tmp_path / "schedules.toml"
        schedules = write_schedules(broker, path, SCHEDULES)
        await run_worker(registry(good=good, bad=bad))
        scheduler = await schedulers.start(path)
        monitor = await run_monitor(
            schedules=schedules.schedules,
            schedules_file=path,
            dashboard_port=free_port(),
            dashboard_token=TOKEN,
            api_tokens=token_settings(),
            monitor_interval_seconds=1,
        )
        assert monitor.dashboard is not None and monitor.dashboard.url is not None
        return Stack(broker, schedules, monitor, monitor.dashboard.url, scheduler)

    return start


def store(system: Stack) -> ScheduleAdmin:
    """The store as the monitor follows it."""
    assert system.monitor.dashboard is not None
    return system.monitor.dashboard.api.admin


async def log_in_with(page: Page, url: str, token: str) -> None:
    """Log in through the form with ``token`` (an API token logs in as its own name)."""
    await page.goto(url + "login")
    await page.get_by_label("Your name").fill("someone")
    await page.get_by_label("Token").fill(token)
    await page.get_by_role("button", name="Log in").click()
    await page.wait_for_url(url)


async def fill(page: Page, fields: dict[str, str]) -> None:
    """Fill the schedule form's inputs by their labels."""
    for label, value in fields.items():
        await page.get_by_label(label, exact=True).fill(value)


async def test_an_admin_creates_by_the_form_it_fires_then_edits_and_archives_it(
    forms: Start, page: Page
) -> None:
    """Created through the form, the schedule is in the store (by the admin's token name)
    and the list, and the scheduler fires it; an edit and an archive make versions 2, 3."""
    system = await forms()
    await log_in_with(page, system.url, TOKENS["admin"])
    await page.goto(system.url + "schedules")
    await page.get_by_role("link", name="New schedule").click()
    await fill(page, {"Name": "rt-tick", "Task": "good", "Every": "1s"})
    await fill(page, {"Payload (JSON)": '{"n": 1}', "Why?": "new customer"})
    await page.get_by_role("button", name="Create").click()
    await page.locator("p.note").get_by_text("created rt-tick: version 1").wait_for()
    made = await store(system).get("rt-tick")
    assert (made.version, made.spec.every, made.spec.payload) == (1, "1s", {"n": 1})
    assert (made.history[0]["by"], made.history[0]["reason"]) == (BY, "new customer")
    await wait_history(
        system.broker,
        lambda es: any(e.type == "fired" and e.schedule == "rt-tick" for e in es),
        "a fire of the schedule made through the form",
        timeout=20,
    )
    await page.goto(system.url + "schedules")
    await page.locator('tr[data-runtime="rt-tick"]').get_by_text("active").wait_for()
    await shot(page, "schedules-runtime")

    await page.locator('tr[data-runtime="rt-tick"]').get_by_role("link").click()
    await fill(page, {"Every": "1h"})
    await page.get_by_label("Overlap").select_option("Forbid")
    await page.get_by_role("button", name="Save").click()
    await page.locator("p.note").get_by_text("saved rt-tick: version 2").wait_for()
    moved = await store(system).get("rt-tick")
    assert (moved.spec.every, moved.spec.concurrency, moved.spec.payload) == (
        "1h",
        "Forbid",
        {"n": 1},
    )
    await shot(page, "schedule-form")
    await page.get_by_placeholder("why archive?").fill("churned")
    await page.get_by_role("button", name="Archive").click()
    await page.locator("p.note").get_by_text("archived rt-tick: version 3").wait_for()
    assert (await store(system).get("rt-tick")).status == "archived"


async def test_an_edit_from_a_stale_version_shows_a_conflict_and_overwrites_nothing(
    forms: Start, page: Page
) -> None:
    """Another writer changes the schedule while the form is open: Save answers 409 saying
    so, keeps what was typed, and the store keeps the other writer's change; an Archive
    from a stale page is refused the same way and shows the schedule as it stands."""
    system = await forms()
    admin = store(system)
    await admin.create({"name": "report", "every": "1h", "task": "good"}, "ops@test")
    await log_in_with(page, system.url, TOKENS["admin"])
    await page.goto(system.url + "schedules/report/edit")
    await fill(page, {"Every": "2h"})
    await admin.update("report", {"every": "3h"}, 1, "ops@test", "meanwhile")
    async with page.expect_response(lambda r: r.request.method == "POST") as answer:
        await page.get_by_role("button", name="Save").click()
    assert (await answer.value).status == 409
    alert = page.get_by_role("alert")
    await alert.get_by_text("changed since you opened the form").wait_for()
    assert "version 2 is current" in await alert.inner_text()
    assert await page.get_by_label("Every", exact=True).input_value() == "2h"
    got = await admin.get("report")
    assert (got.version, got.spec.every) == (2, "3h")
    await shot(page, "schedule-conflict")

    await page.goto(system.url + "schedules/report/edit")  # version 2 now
    await admin.update("report", {"every": "4h"}, 2, "ops@test", "meanwhile again")
    await page.get_by_placeholder("why archive?").fill("done")
    async with page.expect_response(lambda r: r.request.method == "POST") as answer:
        await page.get_by_role("button", name="Archive").click()
    assert (await answer.value).status == 409
    await page.get_by_role("alert").get_by_text("version 3 is current").wait_for()
    assert await page.get_by_label("Every", exact=True).input_value() == "4h"
    assert (await admin.get("report")).status == "active"


async def test_a_viewer_an_operator_and_a_forged_form_cannot_write(
    forms: Start, page: Page
) -> None:
    """A viewer's token and the dashboard's own (operator) token log in but cannot create;
    a form without the session's CSRF token is refused; the store stays empty."""
    system = await forms()
    for token, role in ((TOKENS["viewer"], "viewer"), (TOKEN, "operator")):
        await log_in_with(page, system.url, token)
        await page.goto(system.url + "schedules/new")
        await page.get_by_text(f"with role {role}").wait_for()
        await fill(page, {"Name": "sneaky", "Task": "good", "Every": "1h"})
        async with page.expect_response(lambda r: r.request.method == "POST") as answer:
            await page.get_by_role("button", name="Create").click()
        assert (await answer.value).status == 403
        await page.get_by_text(f"role {role}; this needs admin").wait_for()
    await log_in_with(page, system.url, TOKENS["admin"])
    forged = await page.request.post(
        system.url + "schedules/new",
        form={"name": "sneaky", "task": "good", "every": "1h", "csrf": "guess"},
    )
    assert forged.status == 403 and "out of date" in await forged.text()
    with pytest.raises(ScheduleNotFound):
        await store(system).get("sneaky")


async def test_hostile_input_is_escaped_or_refused_with_what_to_fix(
    forms: Start, page: Page
) -> None:
    """A script tag as a name is refused and shown as text; as a task and in a payload it
    is stored and shown as text, never run; a payload over the limit is refused saying
    so; a bad payload names the field; a credential shows as the mask and is kept."""
    system = await forms()
    await log_in_with(page, system.url, TOKENS["admin"])
    await page.goto(system.url + "schedules/new")
    await fill(page, {"Name": SCRIPT_TASK, "Task": "good", "Every": "1h"})
    await page.get_by_role("button", name="Create").click()
    await page.get_by_role("alert").get_by_text(SCRIPT_TASK, exact=False).wait_for()
    assert await page.locator("main script").count() == 0
    assert "pwned" not in await page.title()

    await fill(page, {"Name": "odd", "Task": SCRIPT_TASK, "Cron": "0 3 * * *", "Every": "1h"})
    await page.get_by_role("button", name="Create").click()
    await page.get_by_text("cron, every: give exactly one of them").first.wait_for()
    assert await page.get_by_label("Every", exact=True).get_attribute("aria-invalid") == "true"
    hostile = {"x": "</textarea><script>document.title='pwned'</script>"}
    await fill(
        page,
        {
            "Every": "",
            "Payload (JSON)": '{"x": "</textarea><script>document.title=\'pwned\'</script>"}',
        },
    )
    await page.get_by_role("button", name="Create").click()
    await page.locator("p.note").get_by_text("created odd").wait_for()
    assert (await store(system).get("odd")).spec.payload == hostile
    await page.goto(system.url + "schedules")
    await page.goto(system.url + "schedules/odd/edit")
    assert "</script>" in await page.get_by_label("Payload (JSON)").input_value()
    assert await page.locator("main script").count() == 0
    assert "pwned" not in await page.title()

    await page.goto(system.url + "schedules/new")
    await fill(page, {"Name": "huge", "Task": "good", "Every": "1h"})
    await page.get_by_label("Payload (JSON)").evaluate(
        "(area) => { area.value = JSON.stringify({blob: 'x'.repeat(1024 * 1024)}); }"
    )
    async with page.expect_response(lambda r: r.request.method == "POST") as answer:
        await page.get_by_role("button", name="Create").click()
    assert (await answer.value).status == 413
    await page.get_by_text("keep the payload small").wait_for()
    await page.goto(system.url + "schedules/new")
    await fill(page, {"Name": "big", "Task": "good", "Every": "1h"})
    await page.get_by_label("Payload (JSON)").evaluate(
        "(area) => { area.value = JSON.stringify({blob: 'x'.repeat(100 * 1024)}); }"
    )
    await page.get_by_role("button", name="Create").click()
    await page.get_by_role("alert").get_by_text("over 65536").wait_for()
    await page.get_by_label("Payload (JSON)").fill("{not json")
    await page.get_by_role("button", name="Create").click()
    await page.get_by_text("payload: not JSON").first.wait_for()
    for name in ("huge", "big"):
        with pytest.raises(ScheduleNotFound):
            await store(system).get(name)


async def test_a_credential_shows_masked_and_an_edit_keeps_it(forms: Start, page: Page) -> None:
    """The edit form shows *** for a literal Authorization header; saving the form as it
    is (with another field changed) keeps the stored credential."""
    system = await forms()
    payload = {"url": "https://hooks.example/in", "headers": {"Authorization": SECRET}}
    spec = {"name": "hook", "every": "1h", "task": "http", "payload": payload}
    await store(system).create(spec, "ops@test")
    await log_in_with(page, system.url, TOKENS["admin"])
    await page.goto(system.url + "schedules/hook/edit")
    shown = await page.get_by_label("Payload (JSON)").input_value()
    assert MASK in shown and SECRET not in await page.content()
    await fill(page, {"Every": "2h"})
    await page.get_by_role("button", name="Save").click()
    await page.locator("p.note").get_by_text("saved hook: version 2").wait_for()
    got = await store(system).get("hook")
    assert (got.spec.every, got.spec.payload) == ("2h", payload)


async def test_an_edit_moving_the_url_elsewhere_may_not_keep_the_masked_credential(
    forms: Start, page: Page
) -> None:
    """Saving the form with the URL moved to another host and the Authorization left as ***
    is refused naming the header; the stored schedule keeps its URL and credential."""
    system = await forms()
    payload = {"url": "https://hooks.example/in", "headers": {"Authorization": SECRET}}
    spec = {"name": "hook", "every": "1h", "task": "http", "payload": payload}
    await store(system).create(spec, "ops@test")
    await log_in_with(page, system.url, TOKENS["admin"])
    await page.goto(system.url + "schedules/hook/edit")
    shown = await page.get_by_label("Payload (JSON)").input_value()
    moved = shown.replace("hooks.example", "evil.example")
    await page.get_by_label("Payload (JSON)").fill(moved)
    await page.get_by_role("button", name="Save").click()
    await page.get_by_role("alert").get_by_text("payload.headers.Authorization").wait_for()
    assert SECRET not in await page.content()
    got = await store(system).get("hook")
    assert (got.version, got.spec.payload) == (1, payload)


async def test_a_file_schedule_is_shown_read_only_saying_the_file_owns_it(
    forms: Start, page: Page
) -> None:
    """The fields of a schedule of CRON_SCHEDULES_FILE are shown, with no Save, and a note
    that the file owns it; a write to it is refused."""
    system = await forms()
    await log_in_with(page, system.url, TOKENS["admin"])
    await page.goto(system.url + "schedules/nightly/edit")
    await page.get_by_text("the file owns this schedule").wait_for()
    assert await page.get_by_label("Cron", exact=True).input_value() == "30 2 * * *"
    assert await page.get_by_role("button", name="Save").count() == 0
    await shot(page, "schedule-file-read-only")
    csrf = await page.locator('input[name="csrf"]').first.input_value()
    sent: dict[str, str | float | bool] = {"csrf": csrf, "version": "1", "task": "good"}
    sent["every"] = "1h"
    refused = await page.request.post(system.url + "schedules/nightly/edit", form=sent)
    assert refused.status == 409 and "change it there" in await refused.text()
