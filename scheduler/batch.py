"""Publish many messages in one write, each confirmed (or returned, or nacked) on its own.

aio-pika sends one message per call, and every call takes the channel lock, starts a
timeout, waits for its own drain and runs a few tasks: about 250 µs of CPU per message on a
small machine, so a burst of 10,000 fires would spend seconds in the client alone. Here a
whole batch is marshalled into one write on the same aiormq channel, and each message's
delivery tag is entered in aiormq's own confirmation table, as ``basic_publish`` does, so
the broker's acks, nacks and returns, and a channel that closes, settle each message
exactly as they would settle a single publish.
"""

from __future__ import annotations

import asyncio
import struct
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

import aiormq
from aio_pika.abc import AbstractChannel
from aiormq.abc import ChannelFrame
from aiormq.exceptions import ChannelInvalidStateError

from topology.envelope import CONTENT_TYPE

_FRAME_METHOD, _FRAME_HEADER, _FRAME_BODY = 1, 2, 3
_FRAME_END = b"\xce"
_BASIC = 60
_PUBLISH = 40
_MANDATORY = b"\x01"
#: Property flags of content_type, headers, delivery_mode, priority and message_id.
_FLAGS = 1 << 15 | 1 << 13 | 1 << 12 | 1 << 11 | 1 << 7
_PERSISTENT_PRIORITY_0 = b"\x02\x00"


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One persistent JSON message with the properties of ``topology.publish.task_message``."""

    exchange: str
    routing_key: str
    body: bytes
    #: Required: the broker's returns name the message by it.
    message_id: str
    headers: Mapping[str, str]


def _shortstr(text: str) -> bytes:
    data = text.encode()
    if len(data) > 255:
        raise ValueError(f"{text[:40]!r}...: AMQP short strings hold at most 255 bytes")
    return len(data).to_bytes(1, "big") + data


def _table(headers: Mapping[str, str]) -> bytes:
    parts = []
    for key, value in headers.items():
        data = value.encode()
        parts += [_shortstr(key), b"S", len(data).to_bytes(4, "big"), data]
    payload = b"".join(parts)
    return len(payload).to_bytes(4, "big") + payload


def _frame(kind: int, channel: int, payload: bytes) -> bytes:
    return b"".join((struct.pack(">BHI", kind, channel, len(payload)), payload, _FRAME_END))


@lru_cache(maxsize=1024)
def _publish_method(channel: int, exchange: str, routing_key: str) -> bytes:
    payload = struct.pack(">HHH", _BASIC, _PUBLISH, 0)
    payload += _shortstr(exchange) + _shortstr(routing_key) + _MANDATORY
    return _frame(_FRAME_METHOD, channel, payload)


_CONTENT_TYPE = _shortstr(CONTENT_TYPE)


def encode(message: Outgoing, channel: int, max_body: int) -> bytes:
    """The frames of one mandatory ``basic.publish``, as pamqp would marshal them.

    Only these few properties are written, so this costs a tenth of pamqp's general
    encoder, which dominated a burst of fires.
    """
    body = message.body
    properties = b"".join(
        (
            _CONTENT_TYPE,
            _table(message.headers),
            _PERSISTENT_PRIORITY_0,
            _shortstr(message.message_id),
        )
    )
    header = struct.pack(">HHQH", _BASIC, 0, len(body), _FLAGS) + properties
    frames = [_publish_method(channel, message.exchange, message.routing_key)]
    frames.append(_frame(_FRAME_HEADER, channel, header))
    frames += [
        _frame(_FRAME_BODY, channel, body[i : i + max_body]) for i in range(0, len(body), max_body)
    ]
    return b"".join(frames)


class Sent:
    """The messages of one batch on their way, each with a future the broker settles."""

    def __init__(self, raw: aiormq.Channel, first: int, messages: Sequence[Outgoing]) -> None:
        self._raw = raw
        self._first = first
        self._messages = messages
        self.futures = [_register(raw, first + i, m) for i, m in enumerate(messages)]

    async def settle(self, deadline: float) -> list[BaseException | None]:
        """Wait for every confirm until ``deadline`` (monotonic); per message None or why not."""
        if self.futures:
            await asyncio.wait(self.futures, timeout=max(deadline - time.monotonic(), 0))
        results = [_outcome(future) for future in self.futures]
        self._forget()
        return results

    def _forget(self) -> None:
        # Returns are matched by message_id; once settled the entries would only pile up.
        tags = self._raw.message_id_delivery_tag
        for offset, message in enumerate(self._messages):
            if tags.get(message.message_id) == self._first + offset:
                del tags[message.message_id]

    def unregister(self) -> None:
        """Take back tags the broker never saw, as ``basic_publish`` does after a failure."""
        self._raw.delivery_tag = self._first - 1
        for offset, future in enumerate(self.futures):
            self._raw.confirmations.pop(self._first + offset, None)
            future.cancel()
        self._forget()


def _outcome(future: asyncio.Future[Any]) -> BaseException | None:
    if not future.done():
        future.cancel()  # a confirm arriving later is ignored
        return TimeoutError("no confirm from the broker in time")
    if future.cancelled():
        return asyncio.CancelledError("the publish was cancelled")
    return future.exception()


async def publish_batch(channel: AbstractChannel, messages: Sequence[Outgoing]) -> Sent:
    """Send the messages, mandatory, in one write; each one's future settles on its confirm.

    The channel must have publisher confirms and ``on_return_raises``: a returned message
    then fails with ``PublishError``, a nacked one with ``DeliveryError``, and every pending
    one when the channel closes.
    """
    raw = cast(aiormq.Channel, await channel.get_underlay_channel())
    _fail_on_close(raw)
    data = b"".join(encode(m, raw.number, raw.max_content_size) for m in messages)
    payload = ChannelFrame(payload=data, should_close=False)
    async with raw.lock:
        sent = Sent(raw, raw.delivery_tag + 1, messages)
        raw.delivery_tag += len(messages)
        try:
            await raw.write_queue.put(payload)
        except BaseException:
            # Not queued, so the broker never saw these tags: reusing them keeps the
            # broker's confirms matched to the right messages.
            sent.unregister()
            raise
    return sent


def _register(raw: aiormq.Channel, tag: int, message: Outgoing) -> asyncio.Future[Any]:
    # A plain future: aiormq's own (``raw.create_future``) carries three callbacks that
    # cost a quarter of a burst's CPU; ``_fail_on_close`` does what they were there for.
    confirmation: asyncio.Future[Any] = raw.loop.create_future()
    raw.confirmations[tag] = confirmation
    raw.message_id_delivery_tag[message.message_id] = tag
    return confirmation


#: aiormq channels whose pending confirms are failed when they close.
_WATCHED: weakref.WeakSet[aiormq.Channel] = weakref.WeakSet()


def _fail_on_close(raw: aiormq.Channel) -> None:
    if raw in _WATCHED:
        return
    _WATCHED.add(raw)

    def closed(closing: asyncio.Future[Any]) -> None:
        error = None if closing.cancelled() else closing.exception()
        reason = error or ChannelInvalidStateError("the channel closed")
        for confirmation in list(raw.confirmations.values()):
            if isinstance(confirmation, asyncio.Future) and not confirmation.done():
                confirmation.set_exception(reason)
                confirmation.exception()  # read: no "never retrieved" if nobody waits

    raw.closing.add_done_callback(closed)
