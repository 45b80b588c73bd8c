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
#: Reasons of an attempt event that ended no run: a long attempt that lost its claim (its
#: parked copy carries the run on) or a delivery of a run whose claim another attempt holds
#: (``docs/long-jobs.md``). The run stays where it was.
CLAIM_LOST = "claim-lost"
CLAIMED = "claimed-elsewhere"
HANDED_OVER = frozenset({CLAIM_LOST, CLAIMED})
