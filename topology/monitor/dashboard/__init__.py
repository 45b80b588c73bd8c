"""The dashboard: the monitor's web page of queues, schedules, runs and failed tasks."""

from warren_cron.monitor.dashboard.service import Dashboard

__all__ = ["Dashboard"]
