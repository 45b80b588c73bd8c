"""The outcomes a run can have: plain values with no imports, so that ``warren history
--help`` lists them without loading the history's readers."""

from __future__ import annotations

RUNNING = "running"
#: Every outcome a run can have, for filters (``warren history --outcome``).
OUTCOMES = (
    RUNNING,
    "retrying",
    "deferred",
    "succeeded",
    "failed",
    "lock-contended",
    "replaced",
    "skipped",
    "cancelled",
)
