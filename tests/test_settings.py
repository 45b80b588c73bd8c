"""Settings: defaults, the CRON_ names, and errors that name the variable."""

from __future__ import annotations

import pytest

from warren_cron.errors import SettingsError
from warren_cron.runtime.settings import CronSettings, load_settings, redact_url
from warren_cron.worker.settings import WorkerSettings


def test_defaults_give_three_retries_of_thirty_seconds_doubling(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without variables the plan is 30s-1m-2m on a local broker."""
    for name in ("CRON_MAX_RETRIES", "CRON_RETRY_DELAY_MS", "CRON_AMQP_URL"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings(CronSettings)
    assert settings.default_plan().key == "30s-1m-2m"
    assert settings.urls == ["amqp://guest:guest@localhost:5672/"]


def test_retry_knobs_are_read_from_their_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """CRON_MAX_RETRIES, CRON_RETRY_DELAY_MS, CRON_RETRY_DELAY_MULTIPLIER shape the plan."""
    monkeypatch.setenv("CRON_MAX_RETRIES", "4")
    monkeypatch.setenv("CRON_RETRY_DELAY_MS", "1000")
    monkeypatch.setenv("CRON_RETRY_DELAY_MULTIPLIER", "3")
    monkeypatch.setenv("CRON_RETRY_MAX_DELAY_MS", "20000")
    assert load_settings(CronSettings).default_plan().key == "1s-3s-9s-20s"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CRON_RETRY_DELAY_MS", "-5"),
        ("CRON_RETRY_DELAY_MULTIPLIER", "0.5"),
        ("CRON_MAX_RETRIES", "51"),
        ("CRON_AMQP_URL", "http://example"),
        ("CRON_QUEUE_TYPE", "stream"),
        ("CRON_LOG_FORMAT", "xml"),
        ("CRON_PREFETCH", "0"),
        ("CRON_NAMESPACE", "cron\n"),  # a line end from a .env file or a secret mount
    ],
)
def test_invalid_values_fail_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    """A bad value is a SettingsError whose message names the variable."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError, match=variable):
        load_settings(WorkerSettings)


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_namespace_is_refused_not_taken_for_the_default(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """CRON_NAMESPACE set but empty names the variable instead of running in 'cron'."""
    monkeypatch.setenv("CRON_NAMESPACE", value)
    with pytest.raises(SettingsError, match="CRON_NAMESPACE: is set but empty"):
        load_settings(WorkerSettings)
    monkeypatch.delenv("CRON_NAMESPACE")
    assert load_settings(WorkerSettings).namespace == "cron"


def test_password_never_appears_in_errors_or_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    """The broker password stays out of error messages, reprs and the safe URL."""
    monkeypatch.setenv("CRON_AMQP_URL", "amqps://app:hunter2@broker:5671/prod")
    settings = load_settings(CronSettings)
    assert "hunter2" not in repr(settings) and "hunter2" not in settings.safe_url
    monkeypatch.setenv("CRON_MAX_RETRIES", "99")
    with pytest.raises(SettingsError) as error:
        load_settings(CronSettings)
    assert "hunter2" not in str(error.value)


def test_redact_keeps_user_host_and_port() -> None:
    """Only the password is hidden."""
    assert redact_url("amqp://u:p@h:5672/v") == "amqp://u:***@h:5672/v"
    assert redact_url("amqp://h/") == "amqp://h/"


def test_task_timeout_must_stay_below_consumer_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A task timeout at or above the broker's consumer_timeout is refused at start."""
    monkeypatch.setenv("CRON_TASK_TIMEOUT_SECONDS", "1800")
    with pytest.raises(SettingsError, match="CRON_CONSUMER_TIMEOUT_SECONDS"):
        load_settings(WorkerSettings)


def test_handler_modules_are_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    """CRON_HANDLER_MODULES lists modules separated by commas."""
    monkeypatch.setenv("CRON_HANDLER_MODULES", "app.jobs, app.reports")
    assert load_settings(WorkerSettings).handler_modules == ["app.jobs", "app.reports"]
