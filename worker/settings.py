"""Worker settings: the shared ones plus consumption, handlers and timeouts."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from warren_cron.runtime.settings import CronSettings, ModuleList, split_list
from warren_cron.worker.attempt import RESULT_MAX_BYTES
from warren_cron.worker.destinations import DEFAULT_DENY, DestinationPolicy, Rules
from warren_cron.worker.rates import parse_rates
from warren_cron.worker.slots import parse_limits


class WorkerSettings(CronSettings):
    """Settings of ``warren worker``."""

    prefetch: int = Field(
        32, ge=1, le=10_000, description="Deliveries held at once: the worker's concurrency."
    )
    handler_modules: ModuleList = Field(
        default_factory=list,
        description="Comma-separated modules to import at start; they register handlers.",
    )
    task_timeout_seconds: float = Field(
        300.0, gt=0, description="Default per-attempt timeout when a task names none."
    )
    consumer_timeout_seconds: float = Field(
        1800.0,
        gt=0,
        description="The broker's consumer_timeout; every task timeout must stay below it.",
    )
    shutdown_grace_seconds: float = Field(
        30.0,
        ge=0,
        description="On SIGTERM, how long running attempts may finish (0: as long as they take).",
    )
    lock_lease_seconds: float = Field(
        20.0,
        gt=0,
        le=3600,
        description="An overlap lock's holder whose node has not answered this long stops "
        "its attempt; keep it under the cluster's net_ticktime (60 s by default).",
    )
    long_lease_seconds: float = Field(
        30.0,
        ge=1,
        le=3600,
        description="A long attempt's lease (docs/long-jobs.md): its run is handed to another "
        "worker within about 1.5 leases of its worker's death.",
    )
    heartbeat_misses: int = Field(
        3,
        ge=1,
        le=100,
        description="Heartbeat intervals a handler registered with one may miss before its "
        "attempt fails as hung.",
    )
    crash_loop_limit: int = Field(
        3,
        ge=1,
        le=100,
        description="Classic queues: worker deaths during one attempt before it is failed.",
    )
    max_body_bytes: int = Field(
        1_048_576, ge=1024, description="Largest task body run; a larger one fails at once."
    )
    result_max_bytes: int = Field(
        RESULT_MAX_BYTES,
        ge=16,
        le=1_048_576,
        description="Largest handler return value, as JSON; a larger one fails the attempt.",
    )

    http_allow: ModuleList = Field(
        default_factory=list,
        description="http task: the only destinations allowed (host names, *.domain, CIDRs); "
        "empty allows all that is not denied.",
    )
    http_deny: ModuleList = Field(
        default_factory=lambda: list(DEFAULT_DENY),
        description="http task: destinations refused, checked after DNS (host names, *.domain, "
        "CIDRs); setting it replaces the defaults (link-local, cloud metadata): list them again.",
    )
    http_secret_env: ModuleList = Field(
        default_factory=list,
        description="http task: environment variables a { env = ... } header may name "
        "(names, or PREFIX_*).",
    )
    http_secret_dir: Path = Field(
        Path("/run/secrets"),
        description="http task: the directory a { file = ... } header may read from.",
    )
    http_signing_secret: SecretStr | None = Field(
        None,
        description="http task: signs every request (X-Cron-Signature, HMAC-SHA256) unless "
        "its payload names a signing_secret of its own.",
        repr=False,
    )

    concurrency_limits: ModuleList = Field(
        default_factory=list,
        description="Most attempts at once across the fleet: task=N, task[field]=N per value "
        "of a payload field, task[@host]=N per http destination host, schedule:NAME=N for a "
        "schedule's runs (comma-separated, e.g. report=2,sync[customer]=1,http[@host]=4).",
    )
    rate_limits: ModuleList = Field(
        default_factory=list,
        description="Most starts of a task per period across the fleet, with a burst: "
        "task=N/PERIOD[:BURST], per payload field value with task[field]=..., per http "
        "destination host with task[@host]=..., for a schedule's runs with schedule:NAME=... "
        "(comma-separated, e.g. "
        "report=10/1s,sync[customer]=100/1m:5,http[@host]=20/1s).",
    )
    flow_scope: Literal["endpoint", "host"] = Field(
        "endpoint",
        description="What the circuit breaker and the retry budget count by: endpoint (an http "
        "task's URL without its query: one failing job does not hold back the other jobs of "
        "its host) or host (scheme, host and port: every path together).",
    )
    breaker_enabled: bool = Field(
        True,
        description="Circuit breaker per http destination (CRON_FLOW_SCOPE): while open, "
        "attempts to it are deferred without spending one.",
    )
    breaker_error_rate: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Circuit breaker: share of the fleet's attempts to a destination that "
        "failed (retryable) over the window that opens its circuit.",
    )
    breaker_window_seconds: float = Field(
        30.0, ge=1, le=3600, description="Circuit breaker: the window error rates are taken over."
    )
    breaker_min_volume: int = Field(
        20,
        ge=1,
        description="Circuit breaker: attempts the fleet must have made to a destination over "
        "the window before its circuit may open.",
    )
    breaker_open_seconds: float = Field(
        30.0,
        ge=1,
        le=86_400,
        description="Circuit breaker: how long an open circuit defers attempts before one probe "
        "may run.",
    )

    retry_budget_enabled: bool = Field(
        True,
        description="Retry budget per http destination (CRON_FLOW_SCOPE): retries at most a "
        "share of the fleet's first attempts there; past it a failure goes to the failed queue.",
    )
    retry_budget_ratio: float = Field(
        0.2,
        ge=0,
        le=10,
        description="Retry budget: retries allowed per first attempt to a destination over the "
        "window (0.2: one retry per five first attempts).",
    )
    retry_budget_min_retries: int = Field(
        10,
        ge=0,
        description="Retry budget: retries to a destination always allowed per window, so a "
        "quiet destination keeps its retries.",
    )
    retry_budget_window_seconds: float = Field(
        60.0,
        ge=1,
        le=86_400,
        description="Retry budget: the window first attempts and retries are counted over.",
    )

    _split_lists = field_validator(
        "handler_modules",
        "http_allow",
        "http_deny",
        "http_secret_env",
        "concurrency_limits",
        "rate_limits",
        mode="before",
    )(split_list)

    @field_validator("http_allow", "http_deny")
    @classmethod
    def _check_rules(cls, value: list[str]) -> list[str]:
        Rules.parse(value)
        return value

    @field_validator("concurrency_limits")
    @classmethod
    def _check_limits(cls, value: list[str]) -> list[str]:
        parse_limits(value)
        return value

    @field_validator("rate_limits")
    @classmethod
    def _check_rates(cls, value: list[str]) -> list[str]:
        parse_rates(value)
        return value

    def destination_policy(self) -> DestinationPolicy:
        """The http task's destination policy, from CRON_HTTP_ALLOW and CRON_HTTP_DENY."""
        return DestinationPolicy(Rules.parse(self.http_allow), Rules.parse(self.http_deny))

    @model_validator(mode="after")
    def _timeout_below_consumer_timeout(self) -> WorkerSettings:
        # A delivery unacked past consumer_timeout makes the broker close the channel and
        # redeliver the task while it still runs: the timeout must fire first.
        if self.task_timeout_seconds >= self.consumer_timeout_seconds:
            raise ValueError(
                f"CRON_TASK_TIMEOUT_SECONDS ({self.task_timeout_seconds}) must be below "
                f"CRON_CONSUMER_TIMEOUT_SECONDS ({self.consumer_timeout_seconds}), the broker's "
                "consumer_timeout; lower the task timeout or raise consumer_timeout on the broker"
            )
        return self

    def timeout_for(self, requested: float | None) -> float:
        """The timeout of one attempt: the task's own, kept under the consumer timeout."""
        ceiling = self.consumer_timeout_seconds * 0.9
        return min(requested or self.task_timeout_seconds, ceiling)
