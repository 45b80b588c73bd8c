"""The dashboard's browser tests: a running worker, scheduler and monitor, and Chromium."""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.async_api import Page

from tests.namespace import TestBroker
from warren_cron.errors import PermanentError
from warren_cron.faultkit.waits import eventually
from warren_cron.history.publisher import publishing
from warren_cron.monitor import Monitor
from warren_cron.scheduler.service import Scheduler
from warren_cron.schedules import commands
from warren_cron.schedules.load import ScheduleSet
from warren_cron.worker.context import TaskContext

ROOT = Path(__file__).resolve().parent.parent
#: Debian's Chromium: Playwright drives it, its own browser download cannot work here.
CHROMIUM = Path("/usr/bin/chromium")
#: Screenshots of every page, for a reviewer to look at (git-ignored).
SCREENSHOTS = ROOT / "tests" / "output" / "screenshots"
TOKEN = "t0ken-for-tests"
#: A task name that would run as script if a page put it into the HTML as it is.
SCRIPT_TASK = "<script>document.title='pwned'</script>"
SCHEDULES = f"""
[[schedule]]
name = "tick"
every = "1s"
task = "good"

[[schedule]]
name = "nightly"
cron = "30 2 * * *"
timezone = "Europe/Berlin"
task = "good"
expect_success_within = "26h"

[[schedule]]
name = "broken"
every = "1d"
task = "bad"
payload = {{ n = 1, headers = {{ Authorization = "Bearer hunter2" }} }}
retry = {{ max_retries = 0 }}

[[schedule]]
name = "odd-name"
every = "1d"
task = "{SCRIPT_TASK}"
retry = {{ max_retries = 0 }}
"""


async def good(payload: Any, ctx: TaskContext) -> None:
    """Succeeds."""


async def bad(payload: Any, ctx: TaskContext) -> None:
    """Fails for good at once."""
    raise PermanentError("the database said no")


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Stack:
    """A worker, a leading scheduler and a monitor serving the dashboard at ``url``."""

    broker: TestBroker
    schedules: ScheduleSet
    monitor: Monitor
    url: str
    #: The in-process scheduler that led when the stack started.
    scheduler: Scheduler | None = None

    async def trigger(self, name: str, by: str = "tester@test") -> str:
        """Trigger schedule ``name`` as warren schedules does; its run id."""
        schedule = self.schedules.get(name)
        assert schedule is not None
        settings = self.monitor.settings
        async with publishing(
            self.broker.connection, self.broker.names, settings, "test"
        ) as history:
            return await commands.trigger(self.broker.connection, settings, schedule, history, by)

    async def failed_records(self, count: int) -> None:
        """Wait until the failed queue and the dashboard's index hold ``count`` records."""
        dashboard = self.monitor.dashboard
        assert dashboard is not None
        failed = self.broker.names.failed_queue

        async def there() -> bool:
            depth = await self.broker.depth(failed)
            return depth == count and len(dashboard.failed.records) == count

        await eventually(there, 20, what=f"{count} failed record(s) in queue and index")


async def shot(page: Page, name: str) -> None:
    """Keep a screenshot of the whole page for the reviewer."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


async def log_in(page: Page, url: str, name: str = "alice", token: str = TOKEN) -> None:
    """Log in with the dashboard token (or ``token``) through the form."""
    await page.goto(url + "login")
    await page.get_by_label("Your name").fill(name)
    await page.get_by_label("Token").fill(token)
    await page.get_by_role("button", name="Log in").click()
    await page.wait_for_url(url)


async def act_on(page: Page, schedule: str, button: str, reason: str) -> None:
    """Open a schedule's actions, give the reason, press ``button``."""
    row = page.locator(f'tr[data-schedule="{schedule}"]')
    await row.locator("summary").click()
    form = row.locator("form", has=page.get_by_role("button", name=button))
    await form.get_by_placeholder("why", exact=False).fill(reason)
    await form.get_by_role("button", name=button).click()


def note(page: Page) -> Callable[[], Any]:
    """The message left after an action."""
    return lambda: page.locator("p.note").inner_text()
