"""The schedules file: what a valid one gives, and errors that name schedule and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from warren_cron.errors import ScheduleError
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.load import load_schedules, parse_schedules

ROOT = Path(__file__).resolve().parent.parent
DEFAULTS = CronSettings(max_retries=3, retry_delay_ms=1000, retry_delay_multiplier=2.0)

VALID = """
[[schedule]]
name = "nightly-report"
cron = "30 2 * * *"
timezone = "Europe/Berlin"
task = "http"
payload = { url = "https://reports.example.com/run", json = { day = "yesterday" } }
timeout_seconds = 60
concurrency = "Forbid"
catch_up = "all"
misfire_grace_seconds = 600
retry = { max_retries = 2, delay_ms = 5000 }

[[schedule]]
name = "heartbeat"
every = "30s"
task = "noop"
"""


def problems(text: str) -> list[str]:
    """The problems reported for a file that must be invalid."""
    with pytest.raises(ScheduleError) as caught:
        parse_schedules(text, DEFAULTS, "schedules.toml")
    assert str(caught.value).startswith("schedules.toml: invalid schedules file")
    return caught.value.problems


def test_a_valid_file_gives_each_schedule_its_fields_and_plan() -> None:
    """Fields are read as written; a retry block overrides only what it names."""
    report, heartbeat = parse_schedules(VALID, DEFAULTS).schedules
    assert (report.spec.concurrency, report.spec.catch_up, report.spec.timeout_seconds) == (
        "Forbid",
        "all",
        60,
    )
    assert report.plan.key == "5s-10s"  # multiplier from CRON_RETRY_DELAY_MULTIPLIER
    assert heartbeat.plan.key == "1s-2s-4s"  # the CRON_* defaults
    assert (heartbeat.spec.concurrency, heartbeat.spec.catch_up) == ("Allow", "latest")


def test_the_example_file_is_valid() -> None:
    """examples/schedules.toml, which the demo runs, passes validation."""
    schedules = load_schedules(ROOT / "examples" / "schedules.toml", DEFAULTS)
    assert {s.name for s in schedules.schedules} >= {"greet", "flaky", "sometimes", "broken"}


def test_every_problem_of_the_file_is_reported_at_once() -> None:
    """Three broken schedules give one line each, naming schedule and field."""
    found = problems(
        '[[schedule]]\nname = "a"\ncron = "61 * * * *"\ntask = "noop"\n'
        '[[schedule]]\nname = "b"\nevery = "5 minutes"\ntask = "noop"\n'
        '[[schedule]]\nname = "c"\nevery = "1m"\ntask = "noop"\ncatch_up = "never"\n'
    )
    assert [line.split(":")[0:2] for line in found] == [
        ["schedule 'a' (#1)", " cron"],
        ["schedule 'b' (#2)", " every"],
        ["schedule 'c' (#3)", " catch_up"],
    ]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('cron = "* * * *"', "cron: '* * * *' has 4 fields; give 5"),
        ('cron = "0 0 * * * *"', "has 6 fields"),
        ('cron = "0 0 30 2 *"', "never fires"),
        ('cron = "0 3 * * *"\ntimezone = "Mars/Olympus"', "timezone: unknown time zone"),
        ('every = "1m"\ntimezone = "UTC"', "timezone: applies to cron schedules only"),
        ('every = "0s"', "every: interval '0s' must be between 1s"),
        ('every = "1m"\ncron = "* * * * *"', "cron, every: give exactly one"),
        ("", "cron, every: give exactly one"),
        ('every = "1m"\nconcurrency = "forbid"', "concurrency: Input should be 'Allow'"),
        ('every = "1m"\nretry = { max_retries = 99 }', "retry.max_retries: Input should be"),
        ('every = "1m"\nretry = { delay = 5 }', "retry.delay: unknown field; known fields: max"),
        ('every = "1m"\nschedule = "daily"', "schedule: unknown field; known fields: name"),
        ('every = "1m"\nmisfire_grace_seconds = -1', "misfire_grace_seconds: Input should"),
        ('every = "1m"\ntimeout_seconds = 0', "timeout_seconds: Input should be greater"),
        (
            'every = "1m"\nstart_at = 2024-02-01T00:00:00Z\nstop_at = 2024-01-01T00:00:00Z',
            "stop_at: 2024-01-01T00:00:00Z is not after start_at",
        ),
        ('every = "1m"\npayload = { when = 2024-01-01 }', "payload"),
    ],
)
def test_a_bad_field_is_named_with_its_schedule(body: str, expected: str) -> None:
    """Each mistake yields one line: the schedule, the field, what is wrong."""
    [line] = problems(f'[[schedule]]\nname = "job"\ntask = "noop"\n{body}\n')
    assert line.startswith("schedule 'job' (#1): ") and expected in line, line


def test_an_http_payload_is_checked_before_anything_runs() -> None:
    """A webhook task with no usable URL fails validation, not at 02:30 in the night."""
    [line] = problems('[[schedule]]\nname = "hook"\nevery = "1h"\ntask = "http"\npayload = {}\n')
    assert line.startswith("schedule 'hook' (#1): payload: invalid http payload: url")


def test_names_must_be_unique_and_usable_in_queue_names() -> None:
    """A duplicate name is listed with every place it appears; spaces are refused."""
    entry = '[[schedule]]\nname = "{}"\nevery = "1m"\ntask = "noop"\n'
    found = problems(entry.format("dup") + entry.format("dup") + entry.format("has space"))
    assert any("name: 'has space': use 1-100 letters" in line for line in found)
    assert "schedule 'dup': name: used by 2 schedules (#1, #2); names must be unique" in found


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[schedule]\nname = 1", "not valid TOML"),
        ('[[schedules]]\nname = "a"', "unknown top-level key(s) ['schedules']"),
        ('schedule = "a"', "'schedule' must be an array of tables"),
    ],
)
def test_a_file_that_is_not_a_schedules_file_says_how_to_write_one(
    text: str, expected: str
) -> None:
    """Broken TOML or a wrong layout is one clear problem."""
    [line] = problems(text)
    assert expected in line


def test_a_missing_file_names_the_setting(tmp_path: Path) -> None:
    """The error says which file and which variable points at it."""
    with pytest.raises(ScheduleError, match="CRON_SCHEDULES_FILE"):
        load_schedules(tmp_path / "nope.toml", DEFAULTS)


def test_retry_plans_are_available_by_schedule_name() -> None:
    """Tools that replay failed fires find each schedule's own plan."""
    plans = parse_schedules(VALID, DEFAULTS).plans()
    assert {name: plan.key for name, plan in plans.items()} == {
        "nightly-report": "5s-10s",
        "heartbeat": "1s-2s-4s",
    }
