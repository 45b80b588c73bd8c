"""How a writer puts its changes in the log: many in one write, each its own message, the
same bytes as a single publish; and its own changes folded without validating them again,
while every other message is validated in full."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pamqp.frame
import pytest
from pamqp import commands
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

from tests.namespace import TestBroker
from warren_cron.broker.batch import encode
from warren_cron.broker.connect import publish_channel
from warren_cron.client import Client
from warren_cron.envelope import CONTENT_TYPE
from warren_cron.errors import InvalidSchedule
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store import streams
from warren_cron.store.book import StoreBook
from warren_cron.store.changes import Change, spec_json
from warren_cron.store.state import StoreState
from warren_cron.store.stored import StoredSchedule


def spec(name: str, **fields: Any) -> dict[str, Any]:
    """An http schedule as an application creates it."""
    url = f"https://reports.example.com/{name}"
    return {"name": name, "cron": "5 3 * * *", "task": "http", "payload": {"url": url}, **fields}


def test_a_change_is_written_as_the_frames_of_a_single_publish() -> None:
    """The outbox's frames for a change are those pamqp writes for one publish of it, the
    ``type`` property included: readers of the log cannot tell the two apart."""
    change = Change("create", "nightly", 0, "ops", None, spec("nightly"))
    message = streams.change_message(change, "ns_schedules")
    properties = commands.Basic.Properties(
        content_type=CONTENT_TYPE,
        headers={},
        delivery_mode=2,
        priority=0,
        message_id=change.id,
        message_type=streams.CHANGE,
    )
    frames: list[Any] = [
        commands.Basic.Publish(exchange="", routing_key="ns_schedules", mandatory=True),
        ContentHeader(properties=properties, body_size=len(message.body)),
    ]
    body = message.body
    frames += [ContentBody(body[i : i + 100]) for i in range(0, len(body), 100)]
    expected = b"".join(pamqp.frame.marshal(frame, 3) for frame in frames)
    assert len(body) > 200 and encode(message, 3, 100) == expected


def test_a_trusted_spec_of_another_name_is_validated_in_full() -> None:
    """The fold takes a writer's checked spec only for the change it was made for: a change
    of another name, whose JSON is invalid, is refused with the validator's words."""
    checked = ScheduleSpec.model_validate(spec("mine"))
    bad = Change("create", "theirs", 0, "x", None, spec("theirs", cron="61 * * * *"))
    refused = StoreState().apply(bad, checked)
    assert isinstance(refused, InvalidSchedule) and "61" in str(refused)


pytestmark_broker = pytest.mark.broker  # the tests above need no broker


@pytestmark_broker
async def test_a_bulk_create_past_the_prefetch_reads_back_alike_for_every_reader(
    broker: TestBroker, client: Client
) -> None:
    """1,500 creates in flight (three times the log consumer's prefetch, acked a loop turn
    at a time): the writer folds its own specs without validating them again, and a
    reader validating each one ends with the same schedules, versions and histories."""
    made = await client.create_schedules([spec(f"r-{i:04d}") for i in range(1500)], by="bulk")
    assert all(isinstance(item, StoredSchedule) for item in made)
    async with Client(broker.settings()) as reader:
        theirs = {s.name: s for s in await reader.list_schedules()}
    mine = {s.name: s for s in await client.list_schedules()}
    assert mine.keys() == theirs.keys() and len(mine) == 1500
    for name, stored in mine.items():
        other = theirs[name]
        assert spec_json(stored.spec) == spec_json(other.spec) and stored.spec == other.spec
        assert (stored.version, stored.history) == (other.version, other.history)


@pytestmark_broker
async def test_a_forged_message_with_a_pending_change_id_is_validated_in_full(
    broker: TestBroker,
) -> None:
    """Another process publishes, under the id of a change this writer has in flight, a
    spec that is not valid: its bytes are not the writer's, so the fold validates them and
    refuses the change."""
    reader = StoreBook(broker.names)
    await reader.start(broker.connection)
    try:
        checked = ScheduleSpec.model_validate(spec("forged"))
        change = Change("create", "forged", 0, "app", None, spec_json(checked))
        bad = spec("forged", cron="61 * * * *")
        forged = Change("create", "forged", 0, "evil", None, bad, id=change.id)
        # What ``append`` registers before it writes; the forgery arrives first.
        reader._own[change.id] = (streams.change_message(change, "x").body, checked)
        channel = await publish_channel(broker.connection)
        body = orjson.dumps(forged.to_json())
        await channel.default_exchange.publish(
            streams._message(body, streams.CHANGE, change.id), broker.names.store_log
        )
        await channel.close()
        await reader.sync()
        assert "forged" not in reader.state.entries
    finally:
        await reader.close()


@pytestmark_broker
async def test_a_change_written_by_an_older_writer_is_read(
    broker: TestBroker, client: Client
) -> None:
    """A change published as writers before the outbox did (aio-pika's publish, no headers
    table) is folded like any other."""
    change = Change("create", "older", 0, "old-client", "before", spec("older"))
    await client.list_schedules()  # the log declared
    channel = await publish_channel(broker.connection)
    message = streams._message(orjson.dumps(change.to_json()), streams.CHANGE, change.id)
    await channel.default_exchange.publish(message, broker.names.store_log)
    await channel.close()
    got = await asyncio.wait_for(client.get_schedule("older"), 30)
    assert (got.version, got.history[-1]["by"], got.spec.cron) == (1, "old-client", "5 3 * * *")
