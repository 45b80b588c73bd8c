"""Bad input reaches a real worker process: each message fails once, with a clear reason."""

from __future__ import annotations

import uuid
from typing import Any

import aio_pika
import orjson
import pytest

from tests.faults.harness import FaultScenario
from tests.webhook import Endpoint, serve
from warren_cron.clock import utcnow
from warren_cron.faultkit.ledger import Fate
from warren_cron.faultkit.workload import ledger_envelope

pytestmark = pytest.mark.faults

NOW = utcnow().isoformat()
BIG = "x" * (2 * 1024 * 1024)


def task(name: Any, payload: Any = None, **fields: Any) -> bytes:
    """A task envelope as JSON, with whatever fields (valid or not) the case needs."""
    envelope = {"task": name, "payload": payload, "run_id": "r", "scheduled_for": NOW, **fields}
    return orjson.dumps(envelope)


def http(**payload: Any) -> bytes:
    """An ``http`` task envelope; ``{url}`` in the URL becomes the local endpoint."""
    return task("http", payload)


#: (body, reason in the failure record, text its error must contain)
CASES = [
    (b"{oops", "decode-error", "not valid UTF-8 JSON"),
    (b"\xc3\x28 latin-1", "decode-error", "not valid UTF-8 JSON"),
    (b"[1, 2]", "decode-error", "JSON object"),
    (b'{"task": "ledgered"}', "decode-error", "run_id: Field required"),
    (task("ledgered", scheduled_for="yesterday"), "decode-error", "scheduled_for"),
    (task("ledgered", timeout_seconds="soon"), "decode-error", "timeout_seconds"),
    (task(["ledgered"]), "decode-error", "task"),
    (task("nobody"), "unknown-task", "CRON_HANDLER_MODULES"),
    (task("ledgered", {"blob": BIG}), "body-too-large", "CRON_MAX_BODY_BYTES"),
    (http(url="ftp://example.test/"), "permanent-error", "url"),
    (http(url="{url}", timeout="abc"), "permanent-error", "timeout"),
    (http(url="{url}", method="TRACE"), "permanent-error", "method"),
    (http(url="{url}", headers={"X-Bad": "a\r\nInjected: 1"}), "permanent-error", "headers"),
    (http(url="{url}", headers={"X-Name": "Zoë"}), "permanent-error", "headers"),
    (http(url="{url}", headers={"Bad Name": "v"}), "permanent-error", "headers"),
    (http(url="http://127.0.0.1:99999/"), "permanent-error", "port"),
    (http(url="{url}/missing", json={"n": 1}), "permanent-error", "HTTP 404"),
]


async def publish_raw(scenario: FaultScenario, bodies: list[tuple[str, bytes, str]]) -> None:
    """Publish bodies as a foreign client might, confirmed, each noted in the ledger."""
    channel = await scenario.broker.channel()
    exchange = await channel.get_exchange(scenario.names.tasks_exchange)
    for run_id, body, reason in bodies:
        scenario.ledger.publishing(run_id, reason)
        message = aio_pika.Message(body, message_id=run_id)
        await exchange.publish(message, scenario.plan.key, mandatory=True)
        scenario.ledger.confirmed(run_id)
    await channel.close()


async def test_every_kind_of_bad_input_fails_once_and_the_worker_carries_on(
    scenario: FaultScenario,
) -> None:
    """Each bad message reaches the failed queue after one attempt; the worker runs on."""
    await scenario.prepare()
    worker = await scenario.worker()
    with serve(Endpoint(statuses=[404])) as endpoint:
        cases = [
            (f"bad-{uuid.uuid4().hex[:8]}", body.replace(b"{url}", endpoint.url.encode()), reason)
            for body, reason, _ in CASES
        ]
        await publish_raw(scenario, cases)
        good = ledger_envelope("ok")
        await scenario.publish([(good, "ok")])
        report = await scenario.check()
    assert worker.alive() and report.runs[good.run_id].fate is Fate.COMPLETED
    for (run_id, _, reason), (body, _, text) in zip(cases, CASES, strict=True):
        run = report.runs[run_id]
        [(got, attempts, raw)] = run.records
        assert (got, attempts, raw) == (reason, 1, False), (body[:80], run.records)
        assert text in scenario.ledger.error_of(run_id), (body[:80], text)
