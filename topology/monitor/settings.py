"""Monitor settings: the shared ones plus alerting and polling."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, HttpUrl, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from warren_cron.monitor.api_tokens import ApiToken, TokenTable
from warren_cron.runtime.settings import CronSettings
from warren_cron.secret_sources import reference_input
from warren_cron.webhook import SecretRef

#: A secret named, never given: ``{"env": "NAME"}`` (a variable of the monitor) or
#: ``{"file": "/path"}``, as everywhere; ``env:NAME`` and ``file:/path`` still work.
SecretReference = Annotated[SecretRef, NoDecode, BeforeValidator(reference_input)]


class MonitorSettings(CronSettings):
    """Settings of ``warren monitor``."""

    alert_webhook_url: HttpUrl | None = Field(
        None,
        description="Where alerts are POSTed as JSON with a chat 'text' line; none: log only.",
        repr=False,
    )
    alert_slack_webhook_url: HttpUrl | None = Field(
        None,
        description="A Slack incoming webhook: alerts as Slack messages (text and blocks).",
        repr=False,
    )
    alert_pagerduty_routing_key: SecretReference | None = Field(
        None,
        description='PagerDuty Events API v2 routing key, by reference ({"env": "NAME"} or '
        '{"file": "/path"}): conditions trigger and resolve incidents, failures trigger one.',
    )
    alert_pagerduty_url: HttpUrl = Field(
        HttpUrl("https://events.pagerduty.com/v2/enqueue"),
        description="PagerDuty Events API v2 endpoint.",
    )
    alert_pagerduty_severity: Literal["critical", "error", "warning", "info"] = Field(
        "error", description="Severity of PagerDuty events (scheduler.down is always critical)."
    )
    alert_opsgenie_api_key: SecretReference | None = Field(
        None,
        description='Opsgenie API integration key, by reference ({"env": "NAME"} or '
        '{"file": "/path"}): alerts created and closed by alias.',
    )
    alert_opsgenie_url: HttpUrl = Field(
        HttpUrl("https://api.opsgenie.com"),
        description="Opsgenie API base URL (https://api.eu.opsgenie.com for EU accounts).",
    )
    alert_opsgenie_priority: Literal["P1", "P2", "P3", "P4", "P5"] = Field(
        "P3", description="Priority of Opsgenie alerts (scheduler.down is always P1)."
    )
    alert_events_url: HttpUrl | None = Field(
        None,
        description="Where signed events (run.failed, schedule.missed, scheduler.down, "
        "failed_queue.threshold) are POSTed; needs CRON_ALERT_EVENTS_SECRET.",
        repr=False,
    )
    alert_events_secret: SecretReference | None = Field(
        None,
        description='Signing secret of the event webhook, by reference ({"env": "NAME"} or '
        '{"file": "/path"}); X-Cron-Signature as on http tasks.',
    )
    alert_min_interval_seconds: float = Field(
        60.0,
        ge=0,
        le=86_400,
        description="At most one alert per this many seconds; more are grouped.",
    )
    alert_group_wait_seconds: float = Field(
        5.0, ge=0, le=3600, description="Wait this long after a first failure to group a burst."
    )
    alert_timeout_seconds: float = Field(
        10.0, gt=0, le=300, description="Timeout of one webhook request."
    )
    monitor_interval_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="How often queue depths, retry queues and each expect_success_within "
        "are checked.",
    )
    failed_alert_threshold: int = Field(
        5, ge=0, description="Alert while the failed queue holds more messages than this."
    )
    scheduler_down_seconds: float = Field(
        60.0,
        gt=0,
        le=86_400,
        description="Alert scheduler.down when no scheduler has led (held the leader queue "
        "and beaten) for this long.",
    )
    scheduler_lag_alert_seconds: float = Field(
        60.0,
        gt=0,
        le=86_400,
        description="Alert scheduler.down too when the leader is this far behind its fires.",
    )
    stalled_margin_seconds: float = Field(
        60.0, ge=0, description="A retry queue head older than its TTL plus this is stalled."
    )

    dashboard_port: int = Field(
        0, ge=0, le=65535, description="Port of the dashboard web page; 0 serves none."
    )
    dashboard_host: str = Field(
        "127.0.0.1",
        min_length=1,
        description="Address the dashboard listens on; 0.0.0.0 inside a container.",
    )
    dashboard_token: SecretStr | None = Field(
        None,
        description="An operator's token for the dashboard's login (as a token of "
        "CRON_API_TOKENS is); with either set, every page needs a login. None of both: the "
        "pages are open to anyone and read-only.",
        repr=False,
    )
    dashboard_anonymous_read: bool = Field(
        False,
        description="With tokens set, let anyone read the dashboard's pages without logging "
        "in (a viewer's rights, never more); actions still need a login.",
    )
    dashboard_session_seconds: int = Field(
        43_200,
        ge=60,
        le=30 * 86_400,
        description="How long a dashboard login lasts; then its user logs in again.",
    )
    dashboard_login_failures: int = Field(
        5,
        ge=1,
        le=1000,
        description="Wrong tokens (login or bearer) one client address may send within "
        "CRON_DASHBOARD_LOCKOUT_SECONDS; then it gets 429 for as long, the right token too.",
    )
    dashboard_lockout_seconds: float = Field(
        60.0,
        gt=0,
        le=86_400,
        description="The window those wrong tokens are counted in, and the lockout after them.",
    )
    dashboard_refresh_seconds: float = Field(
        300.0,
        gt=0,
        le=3600,
        description="How often the dashboard reads the whole failed queue again (new "
        "failures and its own actions show at once).",
    )
    history_scan_events: int = Field(
        100_000,
        ge=1_000,
        description="The most history events one request to the API or dashboard reads from "
        "the stream (a run not kept in memory, a list of runs); past it the answer is partial "
        "(truncated: true) and says how to narrow the query.",
    )
    history_scans: int = Field(
        2,
        ge=1,
        le=100,
        description="Requests that may read the history stream at once; more get 429 with "
        "Retry-After, so viewers cannot starve the monitor's other work.",
    )

    @model_validator(mode="after")
    def _events_are_signed(self) -> MonitorSettings:
        if self.alert_events_url is not None and self.alert_events_secret is None:
            raise ValueError(
                'CRON_ALERT_EVENTS_URL needs CRON_ALERT_EVENTS_SECRET ({"env": "NAME"} or '
                '{"file": "/path"}): events are always signed'
            )
        return self

    api_tokens: list[ApiToken] = Field(
        default_factory=list,
        description="Bearer tokens of the HTTP API (/api/v1/, on the dashboard's port), a "
        'JSON list: {"name": "ci", "role": "viewer", "secret": {"env": "NAME"} '
        'or {"file": "/path"}} or "sha256": "<hex of the token>" instead of "secret"; '
        "roles: viewer, operator, admin; none: the API refuses every call.",
    )

    @field_validator("api_tokens")
    @classmethod
    def _check_tokens(cls, value: list[ApiToken]) -> list[ApiToken]:
        TokenTable(value)  # each secret can be read, and is long enough
        return value
