"""``POST /api/v1/runs/{run_id}/cancel``: cancel a run (``topology/cancel/``), as an operator.

The cancel is the one ``warren runs cancel``, the run page and ``RunHandle.cancel`` do
(``warren_cron.ops.runs_cancel``); its ``cancelled`` history event names the token as ``by``,
which is the audit of this write.
"""

from __future__ import annotations

from warren_cron.errors import BROKER_TROUBLE, CancelError
from warren_cron.monitor.api.problems import ApiError
from warren_cron.monitor.api.routes import Call, Endpoint
from warren_cron.monitor.api.run_models import CancelBody, Cancelled
from warren_cron.ops.runs_cancel import cancel


async def cancel_run(call: Call) -> Cancelled:
    """Cancel a run: not started, it never starts; running, its attempt is stopped."""
    run_id, body = call.request.match_info["run_id"], call.body_as(CancelBody)
    try:
        answer = await cancel(call.dashboard.api.client, run_id, body.reason, call.by)
    except CancelError as error:
        raise ApiError(400, "invalid", str(error)) from None
    except BROKER_TROUBLE as error:
        raise ApiError(
            503, "broker_unavailable", f"the broker could not be used: {error}"
        ) from None
    if not answer.cancelled:
        raise ApiError(409, "already_ended", answer.message, state=answer.state)
    return Cancelled.model_validate(answer.as_json())


ENDPOINTS = [
    Endpoint(
        "POST",
        "/runs/{run_id}/cancel",
        cancel_run,
        "cancel",
        Cancelled,
        CancelBody,
        body_required=False,
        status=202,
        errors=(400, 409, 503),
    ),
]
