"""A hostile endpoint echoes a worker process's secrets in every encoding it knows: nothing of
them reaches the failure records or the worker's log, and the worker carries on."""

from __future__ import annotations

import base64
import uuid

import pytest

from tests.echo import CONTEXT, HOSTILE, echoing, traces
from tests.faults.harness import FaultScenario
from tests.faults.test_bad_input import publish_raw, task
from tests.test_echo_encodings import FORM, by_form
from warren_cron.faultkit.ledger import Fate
from warren_cron.faultkit.workload import ledger_envelope

pytestmark = pytest.mark.faults
#: Named by reference: only the worker's environment holds it.
REFERENCED = "hostileTok3nQ9zW7xV2pL5"
PASSWORD = "faultPassR4nd0mK8s"
BASIC = "Basic " + base64.b64encode(f"ops:{PASSWORD}".encode()).decode()
SECRETS = [REFERENCED, PASSWORD, BASIC]


async def test_an_echo_in_any_encoding_leaves_no_secret_in_records_or_the_workers_log(
    scenario: FaultScenario,
) -> None:
    """One http task per hostile form fails once with the endpoint's words in its record,
    and neither the records nor the worker process's log lines hold a trace of a secret."""
    await scenario.prepare()
    worker = await scenario.worker(CRON_HTTP_SECRET_ENV="HOOK_*", HOOK_TOKEN=REFERENCED)
    async with echoing(by_form) as echo:
        headers = {"X-Upstream": {"env": "HOOK_TOKEN"}, "Authorization": BASIC}
        payloads = {
            f"echo-{uuid.uuid4().hex[:8]}": {
                "url": f"{echo.url}/status/403",
                "headers": {**headers, FORM: form},
            }
            for form in HOSTILE
        }
        cases = [
            (run_id, task("http", payload, run_id=run_id), "permanent-error")
            for run_id, payload in payloads.items()
        ]
        await publish_raw(scenario, cases)
        good = ledger_envelope("ok")
        await scenario.publish([(good, "ok")])
        report = await scenario.check()
    assert {seen[FORM] for seen in echo.seen} == set(HOSTILE), "every form was answered"
    assert worker.alive() and report.runs[good.run_id].fate is Fate.COMPLETED
    for run_id, _, reason in cases:
        [(got, attempts, _)] = report.runs[run_id].records
        error = scenario.ledger.error_of(run_id)
        assert (got, attempts) == (reason, 1) and CONTEXT in error, error
        assert traces(error, SECRETS) == [], error
    assert traces(worker.log(), SECRETS) == []
