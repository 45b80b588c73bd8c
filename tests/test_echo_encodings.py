"""End to end: an endpoint echoing the request's secrets in every encoding ``tests.echo``
knows, a real worker on the real broker, and what it keeps of the failures."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from structlog.testing import capture_logs

from tests.conftest import plan
from tests.echo import CONTEXT, HOSTILE, Raw, echoing, hostile, traces
from tests.helpers import envelope, history, publish_all
from tests.namespace import TestBroker
from tests.test_secret_echo import ENV_SECRET, SECRETS, secret_headers

pytestmark = pytest.mark.broker
#: The header naming the form the echo answers in (not a secret: it is echoed as well).
FORM = "X-Echo-Form"
#: Seconds without progress (a record more, an event more) after which a wait gives up.
STALL = 30.0


def by_form(request: web.Request) -> str | Raw:
    """The echo in the form the request names."""
    return hostile(request.headers[FORM])(request)


def form_of(body: bytes) -> str:
    """The form a failure record's task asked the echo for."""
    return str(orjson.loads(body)["payload"]["headers"][FORM])


async def progress(read: Callable[[], Awaitable[int]], goal: int, what: str) -> None:
    """Poll ``read`` until it reaches ``goal``; fail once it stood still ``STALL`` seconds."""
    loop = asyncio.get_running_loop()
    last, since = -1, loop.time()
    while (now := await read()) < goal:
        if now != last:
            last, since = now, loop.time()
        assert loop.time() - since < STALL, f"{what}: {now} of {goal}, no progress"
        await asyncio.sleep(0.1)


async def test_no_encoding_of_an_echoed_secret_reaches_records_history_or_logs(
    broker: TestBroker, run_worker: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One failing http task per hostile form: its failure record, its history and the
    worker's log lines hold no trace of any secret, and still hold what the endpoint said."""
    monkeypatch.setenv("HOOK_TOKEN", ENV_SECRET)
    with capture_logs() as logs:
        async with echoing(by_form) as echo:
            await run_worker(http_secret_env="HOOK_*", http_secret_dir=tmp_path)
            headers = secret_headers(tmp_path)
            envelopes = [
                envelope("http", {"url": f"{echo.url}/status/403", "headers": {**headers, FORM: f}})
                for f in HOSTILE
            ]
            await publish_all(broker, envelopes, plan(50))
            failed = broker.names.failed_queue
            await progress(lambda: broker.depth(failed), len(HOSTILE), "failure records")
        assert {seen[FORM] for seen in echo.seen} == set(HOSTILE), "every form was answered"
        events = await history_of(broker, len(HOSTILE))
    records = await broker.get_all(failed)
    errors = {form_of(r.body): str(r.headers["cron-error"]) for r in records}
    outputs = {
        **{f"record {form}": error for form, error in errors.items()},
        "records": "\n".join(str(r.headers) for r in records),
        "history": "\n".join(str(e.data) for e in events),
        "logs": "\n".join(map(str, logs)),
    }
    assert {name: t for name, text in outputs.items() if (t := traces(text, SECRETS))} == {}
    assert all(CONTEXT in error for error in errors.values()), errors


async def history_of(broker: TestBroker, failures: int) -> list[Any]:
    """The history once it holds ``failures`` failed runs."""
    found: list[Any] = []

    async def failed() -> int:
        found[:] = await history(broker)
        return sum(e.type == "failed" for e in found)

    await progress(failed, failures, "failed runs in the history")
    return found
