"""Measure a runtime-schedules snapshot: size, encode, decode, broker write and read.

``python scripts/snapshot_size.py [COUNT]`` builds COUNT typical schedules (an http task
with a URL, a cron in a time zone, a retry block, one change of history each), writes the
snapshot as the store does (in parts past 100,000) to a throwaway namespace on
CRON_AMQP_URL and reads it back as a new reader does.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
import zlib

import orjson
from aio_pika.abc import AbstractConnection

from warren_cron.broker.connect import connect
from warren_cron.names import Names
from warren_cron.runtime.settings import CronSettings, load_settings
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.changes import Change, spec_json
from warren_cron.store.parts import read_parts, write_parts
from warren_cron.store.snapshot import (
    SnapshotIndex,
    decode_state,
    encode_snapshot,
    read_snapshot,
    snapshot_bodies,
)
from warren_cron.store.state import StoreState
from warren_cron.store.streams import snapshot_store


def typical(index: int) -> ScheduleSpec:
    """A customer's nightly report, as an application would create it."""
    return ScheduleSpec.model_validate(
        {
            "name": f"customer-{index:06d}-nightly-report",
            "cron": f"{index % 60} {index % 24} * * *",
            "timezone": "Europe/Berlin",
            "task": "http",
            "payload": {"url": f"https://reports.example.com/customers/{index}/nightly"},
            "timeout_seconds": 120,
            "retry": {"max_retries": 5, "delay_ms": 10000},
        }
    )


def build(count: int) -> StoreState:
    """A state of ``count`` schedules, each created once."""
    state = StoreState()
    for index in range(count):
        spec = typical(index)
        state.apply(Change("create", spec.name, 0, "app@host", "signup", spec_json(spec)))
    state.offset = count
    return state


def timed(label: str, started: float) -> float:
    """Print the seconds since ``started``; returns now."""
    now = time.perf_counter()
    print(f"{label}: {now - started:.3f} s")
    return now


async def broker_round(settings: CronSettings, state: StoreState) -> None:
    """Write the snapshot as a writer does (in parts past ``PART_ENTRIES``) and read it
    back as a new reader does, timed; then delete the queue and the parts stream."""
    names = Names(f"snapshot_measure_{uuid.uuid4().hex[:6]}")
    connection = await connect(settings, "warren-snapshot-measure")
    async with connection:
        channel = await connection.channel(publisher_confirms=True)
        store = await snapshot_store(channel, names)
        started = time.perf_counter()
        bodies = await snapshot_bodies(state)
        started = timed(f"encode in {len(bodies)} part(s), in a thread", started)
        print(f"parts: {', '.join(f'{len(b) / 1e6:.2f} MB' for b in bodies)}")
        if len(bodies) > 1:
            index = await write_parts(connection, channel, names, state.offset, bodies)
            bodies = [index.body()]
        await store.write(bodies[0])
        started = timed("broker write (confirmed)", started)
        read = await store_read(connection, names, await store.read())
        timed("broker read and decode, as a new reader", started)
        assert len(read.entries) == len(state.entries)
        await channel.queue_delete(names.store_snapshot)
        await channel.queue_delete(names.store_snapshot_parts)


async def store_read(
    connection: AbstractConnection, names: Names, body: bytes | None
) -> StoreState:
    """The state a snapshot queue's ``body`` holds, its parts read if it is an index."""
    assert body is not None
    read = await read_snapshot(body)
    if isinstance(read, SnapshotIndex):
        return await read_parts(connection, names, read)
    return read


def main() -> None:
    """Measure and print."""
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    state = build(count)
    started = time.perf_counter()
    body = encode_snapshot(state)
    started = timed("encode", started)
    decoded = decode_state(body)
    started = timed("decode (specs trusted: shape and timings checked)", started)
    assert len(decoded.entries) == count
    raw = orjson.loads(zlib.decompress(body))["schedules"]
    for entry in raw.values():
        ScheduleSpec.model_validate(entry["spec"])
    timed("decode as before (every spec validated again)", started)
    started = time.perf_counter()
    rebuilt = encode_snapshot(decoded)
    timed("encode of the decoded state (spec JSON kept)", started)
    assert len(rebuilt) > 0
    print(f"{count} schedules: snapshot {len(body)} bytes ({len(body) / count:.0f} per schedule)")
    asyncio.run(broker_round(load_settings(CronSettings), state))


if __name__ == "__main__":
    main()
