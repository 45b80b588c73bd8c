"""Worker settings: the shared ones plus consumption, handlers and timeouts."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from topology.runtime.settings import CronSettings, ModuleList, split_list


class WorkerSettings(CronSettings):
    """Settings of ``python -m worker``."""

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
        30.0, ge=0, description="On SIGTERM, how long running attempts may finish."
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

    _split_modules = field_validator("handler_modules", mode="before")(split_list)

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
