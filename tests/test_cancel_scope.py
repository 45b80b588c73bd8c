"""Cancels inside one worker, without a broker: the tombstone book and an attempt's scope,
with a cancel coming before the attempt starts, while it runs, and as it ends."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tests.helpers import envelope
from warren_cron.cancel.book import CancelBook
from warren_cron.cancel.tombstone import (
    MAX_REASON,
    Tombstone,
    checked_reason,
    checked_run_id,
    decode,
    encode,
)
from warren_cron.clock import utcnow
from warren_cron.errors import CancelError
from warren_cron.history.events import Event
from warren_cron.history.lifecycle import status_of
from warren_cron.history.run_fold import fold_runs
from warren_cron.names import Names
from warren_cron.worker.attempt import Outcome
from warren_cron.worker.cancels import Cancels


def tomb(run_id: str | None = None, days: float = 1, **fields: object) -> Tombstone:
    """A tombstone kept ``days`` from now."""
    now = utcnow()
    until = now + timedelta(days=days)
    return Tombstone(at=now, until=until, by="ops@host", run_id=run_id, **fields)  # type: ignore[arg-type]


def test_a_tombstone_survives_its_encoding_and_garbage_decodes_to_nothing() -> None:
    """What a worker reads is what was stored; a marker, junk or a foreign schema is passed over."""
    stored = tomb("job@2026-01-01T00:00:00Z-ab", reason="wrong customer")
    assert decode(encode(stored)) == stored
    for junk in (b"[]", b"\xff\x00", b'{"v": 2, "run_id": "x"}', b'{"v": 1, "run_id": "x"}'):
        assert decode(junk) is None
    aimless = b'{"v":1,"at":"2026-01-01T00:00:00Z","until":"2026-01-02T00:00:00Z","by":"x"}'
    assert decode(aimless) is None


def test_bad_run_ids_and_huge_reasons_are_refused_with_what_to_fix() -> None:
    """An empty, huge or unprintable run id, and a reason over the bound, raise CancelError."""
    for bad in ("", "x" * 301, "a\nb", None):
        with pytest.raises(CancelError, match="run id"):
            checked_run_id(bad)
    with pytest.raises(CancelError, match=f"at most {MAX_REASON}"):
        checked_reason("x" * (MAX_REASON + 1))
    assert checked_reason("") is None


def test_the_book_forgets_a_tombstone_once_its_run_could_no_longer_start() -> None:
    """An expired tombstone is not kept; a live one is dropped by the next prune after it
    expired, so the book stays bounded."""
    book = CancelBook()
    assert not book.add(tomb("old", days=-1), utcnow())
    assert book.add(tomb("live", days=1), utcnow())
    assert book.stopping("live", None, utcnow()) is not None
    book.add(tomb("other", days=10), utcnow() + timedelta(days=2))
    assert book.stopping("live", None, utcnow()) is None
    assert len(book) == 1


def test_a_schedule_tombstone_stops_fires_due_before_the_archive_only() -> None:
    """Fires due at or before the archive are stopped; later ones (a schedule made again) run."""
    book, now = CancelBook(), utcnow()
    book.add(tomb(None, schedule="nightly", before=now), now)
    assert book.stopping("nightly@a", "nightly", now - timedelta(hours=1)) is not None
    assert book.stopping("nightly@b", "nightly", now + timedelta(seconds=1)) is None
    assert book.stopping("other@a", "other", now) is None


async def test_a_run_cancelled_before_its_attempt_begins_is_not_started() -> None:
    """The scope of a run a tombstone names comes stopped: the attempt must not begin."""
    cancels, env = Cancels(Names("t")), envelope("job")
    cancels._on_tombstone(tomb(env.run_id, reason="not needed"))
    scope = cancels.scope(env)
    assert scope.stopped is not None
    assert scope.result().outcome is Outcome.CANCELLED
    assert "not needed" in (scope.result().error or "")


async def test_a_cancel_while_the_attempt_runs_stops_it_and_ends_it_cancelled() -> None:
    """The work is stopped where it waits; the scope takes the cancel; the task goes on."""
    cancels, env = Cancels(Names("t")), envelope("job")
    began, finished = asyncio.Event(), False

    async def attempt() -> str:
        nonlocal finished
        scope = cancels.scope(env)
        async with scope:
            began.set()
            await asyncio.sleep(30)
            finished = True
        assert scope.stopped is not None
        await asyncio.sleep(0)  # the task is usable after: no cancel left pending on it
        return scope.result().reason

    task = asyncio.create_task(attempt())
    await began.wait()
    cancels._on_tombstone(tomb(env.run_id))
    assert await asyncio.wait_for(task, 5) == "cancelled"
    assert not finished


async def test_a_cancel_as_the_attempt_ends_leaves_its_result_and_no_pending_cancel() -> None:
    """A cancel that lands after the work's last await: the work's result stands and the
    cancel does not leak into what the task does next (settling the message)."""
    cancels, env = Cancels(Names("t")), envelope("job")

    async def attempt() -> str:
        scope = cancels.scope(env)
        async with scope:
            cancels._on_tombstone(tomb(env.run_id))  # no await between this and the exit
            done = "succeeded"
        assert scope.stopped is None
        await asyncio.sleep(0.01)
        return done

    assert await asyncio.wait_for(asyncio.create_task(attempt()), 5) == "succeeded"


async def test_a_shutdown_cancel_still_goes_out_of_a_cancelled_scope() -> None:
    """The worker's own shutdown cancel is not swallowed by a run's cancel at the same time."""
    cancels, env = Cancels(Names("t")), envelope("job")
    began = asyncio.Event()

    async def attempt() -> None:
        async with cancels.scope(env):
            began.set()
            await asyncio.sleep(30)

    task = asyncio.create_task(attempt())
    await began.wait()
    task.cancel()
    cancels._on_tombstone(tomb(env.run_id))
    with pytest.raises(asyncio.CancelledError):
        await task


def test_the_history_shows_a_cancel_at_once_and_an_attempt_that_ended_first_wins() -> None:
    """A ``cancelled`` event ends a waiting run at once; an attempt event after it (the
    attempt ended before the cancel reached its worker) tells how the run really ended."""
    now = utcnow()

    def told(kind: str, offset: int, **data: object) -> Event:
        return Event(kind, now, offset, "r1", None, {"type": kind, **data})

    asked = told("cancelled", 1, by="ops", reason="wrong day")
    waiting = fold_runs([told("triggered", 0, scheduled_for=None), asked])["r1"]
    assert status_of("r1", waiting, now).state == "cancelled"
    assert status_of("r1", waiting, now).reason == "wrong day"
    ended = told("attempt", 2, attempt=1, outcome="succeeded", reason="succeeded")
    raced = fold_runs([told("started", 0, attempt=1), asked, ended])["r1"]
    assert status_of("r1", raced, now).state == "succeeded"


async def test_an_unread_cancels_stream_holds_attempts_back_once_per_outage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the stream is not read again, the first attempts wait out the patience; later
    ones go on at once, and a new outage after a read one waits again."""
    monkeypatch.setattr("warren_cron.worker.cancels.PATIENCE_SECONDS", 0.2)
    cancels, loop = Cancels(Names("t")), asyncio.get_running_loop()
    cancels._live.set()
    cancels._lost()
    began = loop.time()
    await cancels.current()
    assert loop.time() - began >= 0.2
    await asyncio.wait_for(cancels.current(), 0.05)
    cancels._live.set()
    cancels._lost()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(cancels.current(), 0.1)


async def test_an_outage_longer_than_the_patience_still_holds_its_first_attempt_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The patience starts with the first attempt after the loss: a broker restart slower than
    it does not let the first task after it run before the stream is read again."""
    monkeypatch.setattr("warren_cron.worker.cancels.PATIENCE_SECONDS", 0.2)
    cancels, loop = Cancels(Names("t")), asyncio.get_running_loop()
    cancels._live.set()
    cancels._lost()
    await asyncio.sleep(0.3)  # the outage outlasts the patience before any task comes in
    began = loop.time()
    await cancels.current()
    assert loop.time() - began >= 0.2
