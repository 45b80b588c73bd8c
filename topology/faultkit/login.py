"""Whether a node lets a client log in to its default vhost, asked over AMQP.

Asking ``rabbitmqctl`` starts an Erlang VM: over a second of CPU each time on a loaded
machine, and a test suite that restarts nodes asks often. An AMQP login costs milliseconds,
and succeeds only once the node accepts logins and the vhost runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures

import aio_pika

#: Seconds one login may take before it counts as refused.
LOGIN_SECONDS = 5.0


def logs_in(url: str) -> bool:
    """True when a connection to ``url`` opens a channel; callable from any thread, a
    running event loop's too (the login runs on a thread of its own)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _login(url)).result()


async def _login(url: str) -> bool:
    try:
        connection = await aio_pika.connect(url, timeout=LOGIN_SECONDS)
    except Exception:  # any refusal means not yet
        return False
    try:
        await (await connection.channel()).close()
    except Exception:  # a vhost that refuses the channel
        return False
    finally:
        await connection.close()
    return True
