"""The API's reads of the history stream (``warren_cron.ops.scans``): refused as JSON errors,
and answered partial, with a hint, when they stopped at their bound."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from warren_cron.history.reader import Budget
from warren_cron.monitor.api.problems import ApiError
from warren_cron.monitor.api.routes import Call
from warren_cron.ops.scans import ScanRefused

R = TypeVar("R")
LIST_HINT = (
    "read {scanned} events (CRON_HISTORY_SCAN_EVENTS) before reaching since: older runs may "
    "match; narrow since (since=1h) or ask for a run by its id"
)
RUN_HINT = (
    "read {scanned} events (CRON_HISTORY_SCAN_EVENTS) without reaching the history's end: "
    "later events of the run may be missing; a run id with its time (name@2024-01-01T00:00:00Z)"
    " is read from that time"
)


async def scanned(
    call: Call, read: Callable[[Budget], Coroutine[object, object, R]]
) -> tuple[R, Budget]:
    """What ``read`` found within the monitor's bound; 429 or 503 (Retry-After) when refused."""
    try:
        return await call.dashboard.scans.scan(call.request, read)
    except ScanRefused as refused:
        raise refusal(refused) from None


def refusal(refused: ScanRefused) -> ApiError:
    """A refused read as the API tells it: 429 while other reads run, else 503; both with
    Retry-After."""
    status, code = (429, "throttled") if refused.busy else (503, "unavailable")
    headers = {"Retry-After": str(refused.retry_after)}
    return ApiError(status, code, refused.message, headers)


def partial(budget: Budget | None, hint: str) -> dict[str, Any]:
    """The fields that say how much was read, and whether the answer is partial (with a hint)."""
    if budget is None:
        return {"scanned": 0, "truncated": False, "hint": None}
    text = hint.format(scanned=budget.scanned) if budget.cut else None
    return {"scanned": budget.scanned, "truncated": budget.cut, "hint": text}
