"""A worker asked to stop while its start still waits for the broker stops at once, cleanly,
with nothing taken from a queue (an orchestrator's SIGTERM during an outage)."""

from __future__ import annotations

import asyncio

from warren_cron.worker.consumer import Worker
from warren_cron.worker.settings import WorkerSettings


async def test_a_stop_during_a_start_that_waits_for_the_broker_ends_the_run() -> None:
    """The broker's port accepts and never answers: the start waits; ``stop`` ends the run
    without an error and long before the connection's own timeout."""
    accepted = asyncio.Event()
    held: list[asyncio.StreamWriter] = []

    async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        accepted.set()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    settings = WorkerSettings(amqp_url=f"amqp://guest:guest@127.0.0.1:{port}/", namespace="t")
    worker = Worker(settings)
    run = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(accepted.wait(), 30)
        worker.stop()
        # The connection's own timeout is 10 s: ending sooner shows the stop ended the start.
        await asyncio.wait_for(run, 5)
        assert worker.stopped.is_set() and not worker.ready.is_set()
    finally:
        run.cancel()
        for writer in held:
            writer.close()
        server.close()
