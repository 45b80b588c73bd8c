"""The gate on reads of the history stream a viewer asks for is ``warren_cron.ops.scans``,
below the pages and the API alike; the dashboard's service builds it under this name."""

from __future__ import annotations

from warren_cron.ops.scans import ScanGate as ScanGate
