"""The monitor: logs and alerts on failed tasks, watches queue depths and stalled retries."""

from warren_cron.monitor.service import Monitor
from warren_cron.monitor.settings import MonitorSettings

__all__ = ["Monitor", "MonitorSettings"]
