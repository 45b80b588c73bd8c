"""The dashboard: the monitor's web page of queues, schedules, runs and failed tasks."""

from worker.monitor.dashboard.service import Dashboard

__all__ = ["Dashboard"]
