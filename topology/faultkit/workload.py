"""Ledger tasks: single ones, and mixed workloads whose every kind has an expected end."""

from __future__ import annotations

import random
import uuid
from typing import Any

from warren_cron.clock import utcnow
from warren_cron.envelope import Envelope
from warren_cron.faultkit.ledger import Fate, Report
from warren_cron.faultkit.worker_tasks import TASK


def ledger_envelope(kind: str, **payload: Any) -> Envelope:
    """A ledger task whose run id starts with its kind."""
    return Envelope(
        task=TASK,
        payload=payload,
        run_id=f"{kind}-{uuid.uuid4().hex[:12]}",
        scheduled_for=utcnow(),
    )


#: Share of each kind of task in a mixed workload, and the payload that makes it behave so.
KINDS: dict[str, tuple[int, dict[str, Any]]] = {
    "ok": (60, {}),
    "transient": (20, {"fails": 1}),
    "permanent": (10, {"permanent": True}),
    "exhausted": (10, {"fails": -1}),
}


def workload(count: int, seed: int, **extra: Any) -> list[tuple[Envelope, str]]:
    """``count`` ledger tasks of mixed kinds, drawn by the shares in ``KINDS`` from ``seed``."""
    rng = random.Random(seed)  # noqa: S311 - a reproducible workload, not a secret
    kinds = rng.choices(list(KINDS), weights=[share for share, _ in KINDS.values()], k=count)
    return [(ledger_envelope(kind, **KINDS[kind][1], **extra), kind) for kind in kinds]


#: Where each kind ends when nothing breaks: its fate and, for failed ones, the reason.
EXPECTED = {
    "ok": ("completed", "-"),
    "transient": ("completed", "-"),
    "permanent": ("failed", "permanent-error"),
    "exhausted": ("failed", "retries-exhausted"),
}


def misplaced(report: Report) -> list[tuple[str, str, str]]:
    """Single-outcome runs of a mixed workload that ended other than their kind says."""
    wrong = []
    for run in report.runs.values():
        if run.fate in (Fate.COMPLETED, Fate.FAILED) and run.kind in EXPECTED:
            got = (run.fate.value, ",".join(run.reasons) or "-")
            if got != EXPECTED[run.kind]:
                wrong.append((run.run_id, *got))
    return wrong
