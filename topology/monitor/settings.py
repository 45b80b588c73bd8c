"""Monitor settings: the shared ones plus alerting and polling."""

from __future__ import annotations

from pydantic import Field, HttpUrl, SecretStr, field_validator

from warren_cron.monitor.api.tokens import ApiToken, TokenTable
from warren_cron.runtime.settings import CronSettings


class MonitorSettings(CronSettings):
    """Settings of ``warren monitor``."""

    alert_webhook_url: HttpUrl | None = Field(
        None,
        description="Where alerts are POSTed as JSON with a chat 'text' line; none: log only.",
        repr=False,
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
        description="Token that unlocks the dashboard's actions; none: the dashboard is read-only.",
        repr=False,
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

    @property
    def webhook(self) -> str | None:
        """The webhook URL as a string (it may hold a token: never log it)."""
        return None if self.alert_webhook_url is None else str(self.alert_webhook_url)

    @property
    def safe_webhook(self) -> str | None:
        """Scheme and host of the webhook, for logs: chat webhooks carry their token in the path."""
        url = self.alert_webhook_url
        return None if url is None else f"{url.scheme}://{url.host}/..."
