"""A replay whose copy went out and whose confirm was lost with the connection: the next pass
sends it again (the broker may have dropped it) and says which run may run twice."""

from __future__ import annotations

import asyncio
from typing import Any

import aio_pika
import pytest
import structlog

from tests.conftest import plan
from tests.failed_records import ids_in, put_failed
from tests.namespace import TestBroker
from warren_cron.broker.held import BATCH
from warren_cron.failed.replay import Replayer, ReplayOptions
from warren_cron.failed.select import RecordFilter
from warren_cron.ops.failed import summary
from warren_cron.runtime.settings import CronSettings

pytestmark = pytest.mark.broker


def cut_after_first_copy(monkeypatch: pytest.MonkeyPatch, exchange: str) -> list[str]:
    """The first task copy published to ``exchange`` reaches the broker, then its confirm is
    lost with the connection (a kill after the frame left); returns that copy's message id."""
    publish = aio_pika.Exchange.publish
    cut: list[str] = []

    async def publish_then_cut(self: aio_pika.Exchange, message: Any, *args: Any, **kw: Any) -> Any:
        sent = await publish(self, message, *args, **kw)
        if self.name == exchange and not cut:
            cut.append(message.message_id)
            raise ConnectionResetError("the connection went away before the confirm")
        return sent

    monkeypatch.setattr(aio_pika.Exchange, "publish", publish_then_cut)
    return cut


def replayer(broker: TestBroker) -> Replayer:
    """A replay of every failed record of ``broker``'s namespace, through a 1 minute plan."""
    broker.plan_keys.add("1m")
    settings = CronSettings(namespace=broker.names.namespace, amqp_url=broker.url)
    options = ReplayOptions(select=RecordFilter(), plan_for=lambda record: plan(60_000))
    return Replayer(settings, options)


async def test_a_copy_whose_confirm_was_lost_is_sent_again_and_named(
    broker: TestBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three records, the first copy's confirm lost: the replay resumes, sends that record
    again, moves all three, logs the run id as sent again and counts it in its summary."""
    envs = await put_failed(broker, 3)
    cut = cut_after_first_copy(monkeypatch, broker.names.tasks_exchange)
    with structlog.testing.capture_logs() as logs:
        tally = await replayer(broker).run()
    assert (tally.reconnects, tally.resent, tally.moved, tally.errors) == (1, 1, 3, [])
    [first] = cut
    in_main = await ids_in(broker, broker.names.main_queue)
    assert sorted(in_main) == sorted([first, *(env.run_id for env in envs)])
    assert await ids_in(broker, broker.names.failed_queue) == []
    said = [line["run_id"] for line in logs if line["event"].startswith("record sent again")]
    assert said == [first]
    assert "1 sent again after the broker went away" in summary(tally, "replay")


async def test_a_replay_with_every_confirm_sends_nothing_again(broker: TestBroker) -> None:
    """The ordinary run, for contrast: each record sent once, none counted as sent again."""
    envs = await put_failed(broker, 3)
    tally = await replayer(broker).run()
    assert (tally.reconnects, tally.resent, tally.moved) == (0, 0, 3)
    in_main = await ids_in(broker, broker.names.main_queue)
    assert sorted(in_main) == sorted(env.run_id for env in envs)
    assert "sent again" not in summary(tally, "replay")


async def test_two_replays_racing_on_one_failed_queue_move_each_record_once(
    broker: TestBroker,
) -> None:
    """Two operators replay the same failed queue at once: every record is moved by one of
    them, none twice and none left behind, and their summaries add up to the queue."""
    # More than one consumer's prefetch (``held.BATCH``): each replay holds part of the queue.
    envs = await put_failed(broker, 3 * BATCH)
    first, second = await asyncio.gather(replayer(broker).run(), replayer(broker).run())
    assert first.moved + second.moved == len(envs)
    assert first.errors == second.errors == []
    in_main = await ids_in(broker, broker.names.main_queue)
    assert sorted(in_main) == sorted(env.run_id for env in envs)
    assert await ids_in(broker, broker.names.failed_queue) == []
