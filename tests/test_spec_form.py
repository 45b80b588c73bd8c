"""The dashboard's schedule form holds every field the store accepts, and gives it back."""

from __future__ import annotations

from typing import Any

from warren_cron.monitor.dashboard.pages.spec_form import TICKED, created, form_fields, form_values
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.changes import spec_json

FULL: dict[str, Any] = {
    "name": "report-42",
    "cron": "30 2 * * *",
    "timezone": "Europe/Berlin",
    "task": "http",
    "payload": {"url": "https://reports.example/42", "headers": {"X-Token": {"env": "T"}}},
    "timeout_seconds": 12.5,
    "retry": {"max_retries": 3, "delay_ms": 1000, "multiplier": 2.0, "max_delay_ms": 60000},
    "concurrency": "Forbid",
    "catch_up": "all",
    "misfire_grace_seconds": 60.0,
    "enabled": False,
    "start_at": "2026-12-01T00:00:00Z",
    "stop_at": "2027-06-01T00:00:00Z",
    "expect_success_within": "26h",
    "runs": 10,
    "jitter": "30s",
    "exclude": ["2026-12-25", "2027-01-01"],
    "pause_on_failure": True,
}


def test_every_field_of_a_schedule_survives_the_form() -> None:
    """A spec with every field set, shown in the form and sent back, is the same spec."""
    spec = ScheduleSpec.model_validate(FULL)
    values = form_values(spec_json(spec))
    sent = {key: value for key, value in values.items() if value}  # a browser's post
    fields, problems = form_fields(sent)
    assert problems == []
    assert ScheduleSpec.model_validate(created(fields)) == spec


def test_an_empty_form_is_the_defaults_and_unticked_boxes_are_false() -> None:
    """A new form shows the defaults (enabled ticked); a field left empty is unset."""
    values = form_values(None)
    assert (values["enabled"], values["pause_on_failure"]) == (TICKED, "")
    assert (values["concurrency"], values["catch_up"]) == ("Allow", "latest")
    fields, problems = form_fields({"name": "x", "every": "1h", "task": "t"})
    assert problems == [] and fields["enabled"] is False and fields["runs"] is None
    assert created(fields) == {
        "name": "x",
        "every": "1h",
        "task": "t",
        "enabled": False,
        "pause_on_failure": False,
    }


def test_what_the_form_can_tell_is_wrong_is_named_by_field() -> None:
    """A number that is none and a payload that is not JSON are named with what to give."""
    form = {"runs": "ten", "retry_delay_ms": "1.5s", "payload": "{broken"}
    _, problems = form_fields(form)
    assert len(problems) == 3
    assert "runs: give a whole number, not 'ten'" in problems
    assert "retry.delay_ms: give a whole number, not '1.5s'" in problems
    assert any(problem.startswith("payload: not JSON (") for problem in problems)
