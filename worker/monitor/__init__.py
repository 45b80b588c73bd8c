"""The monitor: logs and alerts on failed tasks, watches queue depths and stalled retries."""

from worker.monitor.service import Monitor
from worker.monitor.settings import MonitorSettings

__all__ = ["Monitor", "MonitorSettings"]
