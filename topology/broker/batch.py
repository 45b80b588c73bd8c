"""Publish many messages in one write, each confirmed (or returned, or nacked) on its own.

aio-pika sends one message per call, and every call takes the channel lock, starts a
timeout, waits for its own drain and runs a few tasks, so a burst of thousands of fires
would spend seconds in the client alone (figures in BENCHMARKS.md). Here a whole batch is
marshalled into one write on the aiormq channel underneath, and each message's confirm is
entered in aiormq's own tables (``topology/broker/underlay.py``), so the broker's acks,
nacks and returns, and a channel that closes, decide each message's outcome exactly as
they would a single publish's.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from aio_pika.abc import AbstractChannel

from warren_cron.broker.underlay import Confirms, max_body, underlay, write_confirmed
from warren_cron.codec import Outgoing
from warren_cron.envelope import CONTENT_TYPE

_FRAME_METHOD, _FRAME_HEADER, _FRAME_BODY = 1, 2, 3
_FRAME_END = b"\xce"
_BASIC = 60
_PUBLISH = 40
_MANDATORY = b"\x01"
#: Property flags of content_type, headers, delivery_mode, priority and message_id.
_FLAGS = 1 << 15 | 1 << 13 | 1 << 12 | 1 << 11 | 1 << 7
#: The flag of ``type``, written after ``message_id`` (properties go in flag order).
_TYPE_FLAG = 1 << 5
_PERSISTENT_PRIORITY_0 = b"\x02\x00"


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
    parts = [
        _CONTENT_TYPE,
        _table(message.headers),
        _PERSISTENT_PRIORITY_0,
        _shortstr(message.message_id),
    ]
    flags = _FLAGS
    if message.type is not None:
        parts.append(_shortstr(message.type))
        flags |= _TYPE_FLAG
    header = struct.pack(">HHQH", _BASIC, 0, len(body), flags) + b"".join(parts)
    frames = [_publish_method(channel, message.exchange, message.routing_key)]
    frames.append(_frame(_FRAME_HEADER, channel, header))
    frames += [
        _frame(_FRAME_BODY, channel, body[i : i + max_body]) for i in range(0, len(body), max_body)
    ]
    return b"".join(frames)


class Sent:
    """The messages of one batch on their way, each waiting for the broker's confirm."""

    def __init__(self, confirms: Confirms) -> None:
        self._confirms = confirms
        self.futures = confirms.futures

    async def confirmed(self, deadline: float) -> list[BaseException | None]:
        """Wait for every confirm until ``deadline`` (monotonic); per message None or why not."""
        if self.futures:
            await asyncio.wait(self.futures, timeout=max(deadline - time.monotonic(), 0))
        results = [_outcome(future) for future in self.futures]
        self._confirms.forget()
        return results


def _outcome(future: asyncio.Future[Any]) -> BaseException | None:
    if not future.done():
        future.cancel()  # a confirm arriving later is ignored
        return TimeoutError("no confirm from the broker in time")
    if future.cancelled():
        return asyncio.CancelledError("the publish was cancelled")
    return future.exception()


async def publish_batch(channel: AbstractChannel, messages: Sequence[Outgoing]) -> Sent:
    """Send the messages, mandatory, in one write; ``Sent.confirmed`` waits for their confirms.

    The channel must have publisher confirms and ``on_return_raises``: a returned message
    then fails with ``PublishError``, a nacked one with ``DeliveryError``, and every pending
    one when the channel closes.
    """
    raw = await underlay(channel)
    size = max_body(raw)
    data = b"".join(encode(m, raw.number, size) for m in messages)
    return Sent(await write_confirmed(raw, data, [m.message_id for m in messages]))
