"""``clients``: HTTP clients alone against the local endpoint, at several concurrencies.

No broker: each client POSTs the same small JSON body to ``benchlib.endpoint`` (its own
process, keep-alive) from N coroutines sharing one client, for a fixed number of requests.
Each client runs as its own process (``python -m benchlib.clients CLIENT N COUNT URL``),
interleaved over the rounds. httpx comes with the ``bench`` extra: the project itself speaks
HTTP with aiohttp only.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from benchlib.common import Run, int_list, print_table, run_baseline
from benchlib.http import JSON, endpoint, payload

CLIENTS = ("aiohttp", "httpx")
Post = Callable[[], Awaitable[None]]


async def drive(post: Post, concurrency: int, count: int) -> None:
    """Send ``count`` requests from ``concurrency`` coroutines; print the end time."""
    left = count

    async def one_at_a_time() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await post()

    await asyncio.gather(*(one_at_a_time() for _ in range(concurrency)))
    print(time.time(), flush=True)


async def with_aiohttp(url: str, concurrency: int, count: int) -> None:
    """One ``aiohttp.ClientSession``, as the worker holds."""
    body = orjson.dumps(payload(url)["json"])
    async with aiohttp.ClientSession() as session:

        async def post() -> None:
            async with session.post(url, data=body, headers=JSON) as response:
                await response.read()

        await drive(post, concurrency, count)


async def with_httpx(url: str, concurrency: int, count: int) -> None:
    """One ``httpx.AsyncClient``, as the worker held before."""
    import httpx

    body = orjson.dumps(payload(url)["json"])
    async with httpx.AsyncClient() as client:

        async def post() -> None:
            (await client.post(url, content=body, headers=JSON)).read()

        await drive(post, concurrency, count)


def clients(args: argparse.Namespace, bench: Any, workdir: Path) -> dict[str, Any]:
    """Requests/s of aiohttp and httpx alone, per concurrency, against the local endpoint."""
    runs: dict[tuple[str, int], list[Run]] = {}
    with endpoint() as url:
        for index in range(args.rounds):
            order = CLIENTS if index % 2 == 0 else CLIENTS[::-1]
            for concurrency in args.concurrency:
                for client in order:
                    command = ["-m", "benchlib.clients", client, str(concurrency)]
                    run = run_baseline([*command, str(args.requests), url], args.requests)
                    runs.setdefault((client, concurrency), []).append(run)
    rows = [
        (f"{client} at {concurrency} requests/s", [r.per_s for r in runs[client, concurrency]])
        for concurrency in args.concurrency
        for client in CLIENTS
    ]
    print_table(f"clients: {args.requests:,} POSTs to a local endpoint", rows)
    result = {
        f"{client}_{concurrency}": statistics.median(r.per_s for r in runs[client, concurrency])
        for (client, concurrency) in runs
    }
    worst = min(args.concurrency, key=lambda c: result[f"aiohttp_{c}"] / result[f"httpx_{c}"])
    result["ratio"] = result[f"aiohttp_{worst}"] / result[f"httpx_{worst}"]
    return result


def add_command(sub: Any) -> None:
    """The ``clients`` subcommand and its options."""
    command = sub.add_parser("clients", help=clients.__doc__)
    command.add_argument("--requests", type=int, default=3000)
    command.add_argument(
        "--concurrency",
        type=int_list,
        default=[1, 10, 32, 100],
        help="comma-separated numbers of coroutines (default 1,10,32,100)",
    )


if __name__ == "__main__":
    name, concurrency, count, target = sys.argv[1:5]
    run = with_aiohttp if name == "aiohttp" else with_httpx
    asyncio.run(run(target, int(concurrency), int(count)))
