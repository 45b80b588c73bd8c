"""A schedules file that cannot even be parsed (nested thousands deep) is rejected on reload
like any invalid file: logged saying what to fix, the poller keeps watching and takes the
next valid edit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from tests.namespace import TestBroker
from tests.scheduling import Schedulers, every, write_schedules
from warren_cron.errors import ScheduleError
from warren_cron.faultkit.waits import eventually
from warren_cron.scheduler import service
from warren_cron.schedules.load import ScheduleSet, load_schedules, parse_schedules

pytestmark = pytest.mark.broker

REJECTED = "schedules not reloaded: the file is invalid; the previous schedules keep running"


def deep(depth: int) -> str:
    """A schedule whose payload is an array nested ``depth`` deep, as TOML."""
    return every("deep", "1h", payload="[" * depth + "]" * depth)


def test_a_file_nested_3000_deep_is_a_schedule_error_naming_the_nesting(
    broker: TestBroker,
) -> None:
    """Parsing it raises ScheduleError (not RecursionError) saying to flatten it."""
    with pytest.raises(ScheduleError, match="nested too deep"):
        parse_schedules(deep(3000), broker.settings())


async def test_the_poller_logs_a_file_nested_too_deep_and_takes_the_next_valid_edit(
    broker: TestBroker, schedulers: Schedulers, tmp_path: Path
) -> None:
    """With polling on, a 3,000-deep file is logged as rejected and the old schedules run
    on; a valid edit after it is reloaded without a SIGHUP."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("kept", "1h"))
    with capture_logs() as logs:
        scheduler = await schedulers.start(path, schedules_poll_seconds=0.05)
        path.write_text(every("kept", "1h") + deep(3000), encoding="utf-8")
        await eventually(
            lambda: [line for line in logs if line["event"] == REJECTED], 15, what="rejected"
        )
        write_schedules(broker, path, every("kept", "1h") + every("added", "1h"))
        await eventually(
            lambda: scheduler.schedules.get("added") is not None, 15, what="the edit reloaded"
        )
    [rejected] = [line for line in logs if line["event"] == REJECTED]
    assert any("nested too deep" in problem for problem in rejected["problems"])


async def test_an_error_nobody_foresaw_in_a_reload_leaves_the_poller_watching(
    broker: TestBroker, schedulers: Schedulers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reload that fails in a way no check names is logged with its error; the poller
    lives on and reads the next edit."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("kept", "1h"))
    failures = [ZeroDivisionError("unforeseen")]

    def load_once_failing(*args: Any) -> ScheduleSet:
        if failures:
            raise failures.pop()
        return load_schedules(*args)

    with capture_logs() as logs:
        scheduler = await schedulers.start(path, schedules_poll_seconds=0.05)
        monkeypatch.setattr(service, "load_schedules", load_once_failing)
        write_schedules(broker, path, every("kept", "1h") + every("first", "1h"))
        await eventually(lambda: not failures, 15, what="the failing reload")
        write_schedules(broker, path, every("kept", "1h") + every("added", "1h"))
        await eventually(
            lambda: scheduler.schedules.get("added") is not None, 15, what="the edit reloaded"
        )
    [failed] = [line for line in logs if line["event"].startswith("schedules not reloaded")]
    assert failed["log_level"] == "error" and "could not be read" in failed["event"]
