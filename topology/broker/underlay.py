"""aiormq's channel under aio-pika's, and the one place that uses aiormq's internals.

Two paths are hot enough for aio-pika's per-message work to show: a burst of fires and a
worker draining its queue. The scheduler writes a whole batch of publishes at once and
enters each message's confirm in aiormq's own tables, where aiormq's frame reader resolves
it on the broker's ack, nack or return (``write_confirmed``); the worker consumes on aiormq's
channel, without aio-pika's wrapper around each delivery (``underlay``, ``consuming``).

Callers see aiormq's documented interface only (``aiormq.abc.AbstractChannel``); what this
module needs beyond it is listed in ``RELIED_ON``, and ``tests/test_underlay.py`` checks
each entry against the installed aiormq, so a release that changes one fails there first.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import aiormq
import aiormq.abc
from aio_pika.abc import AbstractChannel
from aiormq.abc import ChannelFrame
from aiormq.exceptions import ChannelInvalidStateError

#: aiormq's channel as the rest of the code may use it: its documented interface.
RawChannel = aiormq.abc.AbstractChannel


@dataclass(frozen=True, slots=True)
class Reliance:
    """One name this module uses that aiormq does not document, and the shape it must keep."""

    owner: type
    name: str
    #: The type of the value on an open channel, or a callable's parameter names in order.
    shape: type | tuple[str, ...]
    why: str


RELIED_ON: tuple[Reliance, ...] = (
    Reliance(aiormq.Channel, "consumers", dict, "consumer tag -> callback; a cancel drops it"),
    Reliance(aiormq.Channel, "max_content_size", int, "the largest body frame's payload"),
    Reliance(aiormq.Channel, "lock", AbstractAsyncContextManager, "orders delivery tags"),
    Reliance(aiormq.Channel, "delivery_tag", int, "the last publish's sequence number"),
    Reliance(aiormq.Channel, "write_queue", asyncio.Queue, "frames to the connection's writer"),
    Reliance(aiormq.Channel, "confirmations", dict, "delivery tag -> future of its confirm"),
    Reliance(aiormq.Channel, "message_id_delivery_tag", dict, "message id -> tag, for returns"),
    Reliance(
        ChannelFrame, "__init__", ("self", "payload", "should_close", "drain_future"), "one write"
    ),
    # The readers of those tables: what resolves the futures this module enters.
    Reliance(aiormq.Channel, "_on_confirm_frame", ("self", "frame"), "ack or nack -> tag(s)"),
    Reliance(aiormq.Channel, "_confirm_delivery", ("self", "delivery_tag", "frame"), "one tag"),
    Reliance(aiormq.Channel, "_on_return_frame", ("self", "frame"), "return -> message id"),
)


def _inside(raw: RawChannel) -> aiormq.Channel:
    if not isinstance(raw, aiormq.Channel):
        raise TypeError(f"{raw!r} is not aiormq's Channel, whose internals this module uses")
    return raw


async def underlay(channel: AbstractChannel) -> RawChannel:
    """The aiormq channel under an open aio-pika one (a new one after each reopen)."""
    return _inside(await channel.get_underlay_channel())


def consuming(raw: RawChannel, consumer_tag: str) -> bool:
    """True while ``consumer_tag`` consumes on ``raw``; a cancel or a close ends that."""
    return not raw.is_closed and consumer_tag in _inside(raw).consumers


def max_body(raw: RawChannel) -> int:
    """The most body bytes one content frame on ``raw`` may carry."""
    return _inside(raw).max_content_size


class Confirms:
    """The confirms of messages written together: one future each, resolved by aiormq.

    A future gets the broker's ``Basic.Ack`` frame, or fails: ``DeliveryError`` on a nack,
    ``PublishError`` on a return (the channel must have ``on_return_raises``), and the
    channel's error when it closes first.
    """

    def __init__(self, raw: aiormq.Channel, first: int, message_ids: Sequence[str]) -> None:
        self._raw = raw
        self._first = first
        self._message_ids = message_ids
        self.futures = [self._enter(tag, m) for tag, m in enumerate(message_ids, first)]

    def _enter(self, tag: int, message_id: str) -> asyncio.Future[Any]:
        # A plain future: aiormq's own carry callbacks that cost much of a burst's CPU;
        # ``_fail_on_close`` does what they were there for.
        confirmation: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._raw.confirmations[tag] = confirmation
        self._raw.message_id_delivery_tag[message_id] = tag
        return confirmation

    def forget(self) -> None:
        """Drop the entries that match returns to these messages, once their outcomes are read."""
        # aiormq drops its own when a confirm arrives; these would only pile up.
        tags = self._raw.message_id_delivery_tag
        for tag, message_id in enumerate(self._message_ids, self._first):
            if tags.get(message_id) == tag:
                del tags[message_id]

    def take_back(self) -> None:
        """Undo the entries of a write the broker never saw, as ``basic_publish`` does."""
        # Reusing the tags keeps the broker's confirms matched to the right messages.
        self._raw.delivery_tag = self._first - 1
        for tag, future in enumerate(self.futures, self._first):
            self._raw.confirmations.pop(tag, None)
            future.cancel()
        self.forget()


async def write_confirmed(raw: RawChannel, data: bytes, message_ids: Sequence[str]) -> Confirms:
    """Write ``data``, the frames of one publish per id in ``message_ids``, each confirmed.

    The frames must be for ``raw`` (its number, bodies split at ``max_body``), and ``raw``
    must have publisher confirms.
    """
    channel = _inside(raw)
    _fail_on_close(channel)
    frame = ChannelFrame(payload=data, should_close=False)
    async with channel.lock:
        confirms = Confirms(channel, channel.delivery_tag + 1, message_ids)
        channel.delivery_tag += len(message_ids)
        try:
            await channel.write_queue.put(frame)
        except BaseException:
            confirms.take_back()
            raise
    return confirms


#: aiormq channels whose pending confirms are failed when they close.
_WATCHED: weakref.WeakSet[aiormq.Channel] = weakref.WeakSet()


def _fail_on_close(channel: aiormq.Channel) -> None:
    if channel in _WATCHED:
        return
    _WATCHED.add(channel)

    def closed(closing: asyncio.Future[Any]) -> None:
        error = None if closing.cancelled() else closing.exception()
        reason = error or ChannelInvalidStateError("the channel closed")
        for confirmation in list(channel.confirmations.values()):
            if isinstance(confirmation, asyncio.Future) and not confirmation.done():
                confirmation.set_exception(reason)
                confirmation.exception()  # read: no "never retrieved" if nobody waits

    channel.closing.add_done_callback(closed)
