"""mypy strict on call sites of task handles: typed calls pass, wrong ones are refused."""

from __future__ import annotations

import re
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parent.parent
#: Each line marked ``# E`` must be an error, and no other line may be.
SNIPPET = '''
from warren_cron import SyncClient, TaskContext, task
from warren_cron.client import Client, Enqueued
from tests.kit_handlers import Report, Sent, greet, send_report


async def calls(client: Client, sync: SyncClient) -> None:
    done: Enqueued = await send_report.enqueue(Report(customer=1), client=client, delay=90)
    sent: Sent = await send_report.result(done, timeout=5)
    greet.enqueue_sync({"name": "Ada"}, client=sync, key="k")
    text: str = greet.result_sync(done)
    await send_report.enqueue({"customer": 1})  # E
    await send_report.enqueue(Report(customer=1), dely=90)  # E
    greet.enqueue_sync({"nom": "Ada"})  # E
    number: int = await send_report.result(done)  # E
    await send_report.enqueue(Report(customer=1), client=sync)  # E
    await greet(Report(customer=1), None)  # E


@task("typing-plain")
async def plain(payload: dict[str, int], ctx: TaskContext) -> None:
    """An untyped payload: any dict of ints."""


async def more() -> None:
    await plain.enqueue({"n": 1})
    await plain.enqueue(["n"])  # E
    await plain({"n": 1}, TaskContext.__new__(TaskContext))
'''


def test_mypy_accepts_typed_handle_calls_and_refuses_wrong_ones(tmp_path: Path) -> None:
    """Payloads of the handler's type, ``enqueue``'s options, the result's type and the right
    client kind pass mypy strict; every other marked line is an error, and only those."""
    source = tmp_path / "handle_calls.py"
    source.write_text(SNIPPET)
    stdout, stderr, _ = api.run(
        [
            str(source),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--no-error-summary",
        ]
    )
    assert not stderr, stderr
    errors = {int(m[1]) for m in re.finditer(r"handle_calls\.py:(\d+): error", stdout)}
    marked = {n for n, line in enumerate(SNIPPET.splitlines(), 1) if line.endswith("# E")}
    assert errors == marked, stdout
