"""The cancels stream's declare: a start that fails leaves no connection of its own open."""

from __future__ import annotations

from typing import Any, cast

import pytest
from aio_pika.abc import AbstractConnection
from aiormq.exceptions import ChannelNotFoundEntity

from warren_cron.cancel import stream
from warren_cron.names import Names


class Marker:
    """A marker connection that records its close."""

    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        """Record the close."""
        self.closed = True


async def test_a_failed_declare_closes_the_marker_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stream refused (its member not started after a restart): the worker's marker
    connection is closed at once, not left to the garbage collector, whose close outside the
    event loop never ran ("coroutine 'Connection.close' was never awaited")."""

    async def refused(*_: Any) -> None:
        raise ChannelNotFoundEntity("stream not started")

    monkeypatch.setattr(stream, "declare_stream", refused)
    marker = Marker()
    with pytest.raises(ChannelNotFoundEntity):
        await stream.declare_cancels(
            cast(AbstractConnection, None), Names("t"), cast(AbstractConnection, marker)
        )
    assert marker.closed
