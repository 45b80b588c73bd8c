"""A cancel whose channel the broker closed under it is stored again once the connection is
back: RabbitMQ 3.x closes a connection that writes to a stream declared a moment before, as
the client's first cancel in a new namespace does."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from aiormq.exceptions import ChannelInvalidStateError

from warren_cron.cancel.request import CancelAnswer
from warren_cron.errors import BrokerUnavailable
from warren_cron.history.lifecycle import RunStatus
from warren_cron.names import Names
from warren_cron.ops import runs_cancel


class Access:
    """A client's access whose history says the run waits; its channel is never used."""

    async def history_access(self) -> tuple[Any, str]:
        """No connection: the status is given below."""
        return None, "history"

    async def cancel_access(self) -> tuple[Any, Names]:
        """A stand-in channel; ``cancel_run`` is replaced in these tests."""
        return object(), Names("t")


def closing(failures: int, calls: list[int]) -> Any:
    """A ``cancel_run`` whose first ``failures`` calls meet a channel closed under them."""

    async def store(*args: Any) -> CancelAnswer:
        calls.append(1)
        if len(calls) <= failures:
            raise ChannelInvalidStateError("channel closed")
        return CancelAnswer(run_id="r", state="pending", cancelled=True, message="cancelled")

    return store


@pytest.fixture
def waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that waits, and no wait between tries."""

    async def status(*args: Any) -> RunStatus:
        return RunStatus(run_id="r", state="pending")

    monkeypatch.setattr(runs_cancel, "run_status", status)
    monkeypatch.setattr(runs_cancel, "STORE_RETRY_SECONDS", (0.0, 0.0))


@pytest.mark.usefixtures("waiting")
async def test_a_cancel_whose_channel_closed_under_it_is_stored_on_the_next_try(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One closed channel, then the connection is back: the cancel is stored and answered."""
    calls: list[int] = []
    monkeypatch.setattr(runs_cancel, "cancel_run", closing(1, calls))
    answer = await runs_cancel.cancel(Access(), "r", "why", "ops@test", datetime.now())
    assert answer.cancelled and len(calls) == 2


@pytest.mark.usefixtures("waiting")
async def test_a_broker_that_stays_gone_is_broker_unavailable_after_three_tries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every try meets a closed channel: three tries, then ``BrokerUnavailable``."""
    calls: list[int] = []
    monkeypatch.setattr(runs_cancel, "cancel_run", closing(10, calls))
    with pytest.raises(BrokerUnavailable, match="may not be done"):
        await runs_cancel.cancel(Access(), "r", "why", "ops@test")
    assert len(calls) == 3
