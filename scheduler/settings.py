"""Scheduler settings: the shared ones plus reloading and leadership."""

from __future__ import annotations

from pydantic import Field

from warren_cron.runtime.settings import CronSettings


class SchedulerSettings(CronSettings):
    """Settings of ``warren scheduler``."""

    schedules_poll_seconds: float = Field(
        5.0,
        ge=0,
        le=3600,
        description="How often the file's mtime is checked for a reload; 0: only on SIGHUP.",
    )
    scheduler_heartbeat_seconds: int = Field(
        5,
        ge=1,
        le=600,
        description="AMQP heartbeat of the scheduler, and half its leader lease: a silent or "
        "cut-off leader steps down or is replaced after ~2x.",
    )
    scheduler_beat_seconds: float = Field(
        5.0,
        gt=0,
        le=600,
        description="How often each scheduler says on <ns>_scheduler.beats that it lives, "
        "whether it leads and how late it is (the monitor's liveness alert reads it).",
    )
    leader_retry_seconds: float = Field(
        3.0,
        gt=0,
        le=600,
        description="How often a standby tries to take over, and to reconnect after a loss.",
    )
    task_timeout_seconds: float = Field(
        300.0,
        gt=0,
        description="The workers' default attempt timeout; --check uses it for worst cases.",
    )
