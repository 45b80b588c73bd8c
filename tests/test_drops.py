"""Which failures a step that opens a stream is tried again after, and how."""

from __future__ import annotations

import aio_pika
import pytest
from aio_pika.abc import AbstractRobustConnection
from aiormq.exceptions import (
    ChannelInvalidStateError,
    ChannelPreconditionFailed,
    ConnectionInternalError,
)

import warren_cron.broker.drops as drops_module
from tests.namespace import TestBroker
from warren_cron.broker.drops import passing, through_drops

#: RabbitMQ 4.3's refusal of a consumer at a stream whose member has not started yet.
NOT_STARTED = ChannelPreconditionFailed(
    "PRECONDITION_FAILED - stream queue 'x_control' in vhost '/' does not have a running "
    "replica on the local node"
)
#: RabbitMQ 4.3's refusal of a consumer at a stream declared a moment before.
NOT_REGISTERED = ChannelPreconditionFailed(
    "PRECONDITION_FAILED - queue 'queue 'x_history' in vhost '/'' does not have a replica on "
    "the local node"
)


async def test_a_stream_member_not_started_yet_passes_on_any_connection(
    broker: TestBroker,
) -> None:
    """Refused because the stream has not started (or is not registered yet) on its node:
    tried again, robust or not."""
    plain, robust = broker.connection, await aio_pika.connect_robust(broker.url)
    try:
        assert passing(robust, NOT_STARTED, robust.transport)
        assert passing(robust, NOT_REGISTERED, robust.transport)
    finally:
        await robust.close()
    assert not isinstance(plain, AbstractRobustConnection)
    assert passing(plain, NOT_STARTED, plain.transport)
    assert passing(plain, NOT_REGISTERED, plain.transport)


def test_another_refusal_is_raised_at_once(broker: TestBroker) -> None:
    """A declaration the broker refuses for its arguments will be refused again."""
    refused = ChannelPreconditionFailed("PRECONDITION_FAILED - inequivalent arg 'x-queue-type'")
    assert not passing(broker.connection, refused, broker.connection.transport)


async def test_a_drop_under_the_step_passes_on_a_robust_connection_only(
    broker: TestBroker,
) -> None:
    """A lost connection comes back by itself only when robust; a channel found closed is a
    drop's doing only when the connection changed under the step; a connection its owner
    closed is not waited for."""
    plain, robust = broker.connection, await aio_pika.connect_robust(broker.url)
    lost = ConnectionInternalError("INTERNAL_ERROR")
    closed = ChannelInvalidStateError("channel closed")
    try:
        assert passing(robust, lost, robust.transport)
        assert passing(robust, closed, object())  # the transport the step began on is gone
        assert not passing(robust, closed, robust.transport)  # the same one: not a drop
    finally:
        await robust.close()
    assert not passing(robust, lost, None)
    assert not passing(plain, lost, plain.transport)


async def test_a_step_is_tried_again_after_undoing_it_until_it_works(
    broker: TestBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two refusals of a stream not started, each undone, then the step's result."""
    monkeypatch.setattr(drops_module, "RETRY_SECONDS", 0.01)
    tries, undone = [0], [0]

    async def step() -> str:
        tries[0] += 1
        if tries[0] < 3:
            raise NOT_STARTED
        return "opened"

    async def undo() -> None:
        undone[0] += 1

    assert await through_drops(broker.connection, step, undo) == "opened"
    assert (tries[0], undone[0]) == (3, 2)


async def test_a_step_still_failing_after_the_recovery_time_raises(
    broker: TestBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stream that never starts is an error after ``RECOVERY_SECONDS``, not a hang."""
    monkeypatch.setattr(drops_module, "RETRY_SECONDS", 0.01)
    monkeypatch.setattr(drops_module, "RECOVERY_SECONDS", 0.2)

    async def step() -> None:
        raise NOT_STARTED

    with pytest.raises(ChannelPreconditionFailed, match="running replica"):
        await through_drops(broker.connection, step)
