"""What ``warren doctor`` gathers before judging: the broker's own words over AMQP and, when
given, its management API's. Nothing here is changed on the broker (see ``broker.probe``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any

from aio_pika.abc import AbstractConnection

from warren_cron.broker.connect import connect
from warren_cron.broker.inspect import counts
from warren_cron.broker.management import Management, ManagementError, vhost_and_auth
from warren_cron.broker.probe import (
    DELAYED_TYPE,
    QueueState,
    ServerInfo,
    delayed_message_plugin,
    queue_state,
    server_info,
)
from warren_cron.declare import QueueType, kept_arguments, main_arguments, retry_arguments
from warren_cron.names import Names
from warren_cron.runtime.settings import CronSettings


@dataclass(frozen=True, slots=True)
class Timeouts:
    """The worker's timeouts from CRON_*, or why they are refused."""

    task_seconds: float
    consumer_seconds: float
    refused: str | None = None


@dataclass(slots=True)
class Survey:
    """Everything the checks look at."""

    settings: CronSettings
    timeouts: Timeouts
    server: ServerInfo
    #: By role ("main", "failed", "monitor", "retry 30s-1m-2m"); None: the queue does not exist.
    queues: dict[str, QueueState | None]
    failed_growth: int | None = None
    watched_seconds: float = 0
    delayed_plugin: bool = False
    management: bool = False
    management_error: str | None = None
    khepri: bool | None = None
    nodes: int | None = None
    #: Effective policy definition of each existing queue, by queue name (management API).
    policies: dict[str, dict[str, Any]] = field(default_factory=dict)


def expected_queues(
    settings: CronSettings, kind: QueueType | None = None
) -> dict[str, tuple[str, dict[str, Any]]]:
    """Role -> (queue name, the arguments warren declares it with) for this configuration, or
    for queues of type ``kind`` instead of CRON_QUEUE_TYPE."""
    names, kind = Names(settings.namespace), kind or settings.queue_type
    main = main_arguments(names, settings.model_copy(update={"queue_type": kind}))
    wanted = {
        "main": (names.main_queue, main),
        "failed": (names.failed_queue, kept_arguments(kind)),
        "monitor": (names.monitor_queue, kept_arguments(kind)),
    }
    for step in settings.default_plan().suffixes():
        wanted[f"retry {step.key}"] = (
            names.retry_queue(step.key),
            retry_arguments(names, kind, step),
        )
    return wanted


async def queue_states(
    connection: AbstractConnection, settings: CronSettings
) -> dict[str, QueueState | None]:
    """Each queue's state; a queue that would take the other type's declaration is named so
    (the broker names the first argument that differs, seldom x-queue-type)."""
    other: QueueType = "classic" if settings.queue_type == "quorum" else "quorum"
    as_other = expected_queues(settings, other)
    states = {}
    for role, (name, args) in expected_queues(settings).items():
        state = await queue_state(connection, name, args)
        if state and state.mismatch:
            fits = await queue_state(connection, name, as_other[role][1])
            if fits and not fits.mismatch:
                said = f"it is a {other} queue, CRON_QUEUE_TYPE is {settings.queue_type}"
                state = replace(state, mismatch=said, argument="x-queue-type")
        states[role] = state
    return states


async def growth(connection: AbstractConnection, queue: str, seconds: float) -> int | None:
    """Messages ``queue`` gained over ``seconds`` (None: it does not exist, or not watched)."""
    before = await counts(connection, queue)
    if before is None or seconds <= 0:
        return None
    await asyncio.sleep(seconds)
    after = await counts(connection, queue)
    return None if after is None else after[0] - before[0]


async def over_amqp(settings: CronSettings, timeouts: Timeouts, watch: float) -> Survey:
    """The AMQP side: version, queues, the failed queue's growth, the delayed-message plugin."""
    connection = await connect(settings, "warren-doctor", log_outages=False)
    async with connection:
        queues = await queue_states(connection, settings)
        found = Survey(settings, timeouts, server_info(connection), queues)
        found.failed_growth = await growth(
            connection, Names(settings.namespace).failed_queue, watch
        )
        found.watched_seconds = watch
        url = str(getattr(connection, "url", settings.urls[0]))  # the node that answered
    found.delayed_plugin = await delayed_message_plugin(url)
    return found


async def with_management(found: Survey, url: str) -> None:
    """Add what only the management API tells; a failure to reach it becomes a finding."""
    vhost, auth = vhost_and_auth(found.settings.urls[0])
    api = Management(url, vhost, auth)
    try:
        overview = await api.overview()
        found.delayed_plugin = any(
            t.get("name") == DELAYED_TYPE for t in overview.get("exchange_types", [])
        )
        found.khepri = await api.khepri()
        found.nodes = await api.node_count()
        for state in found.queues.values():
            details = await api.queue(state.name) if state else None
            if state and details:
                found.policies[state.name] = details.get("effective_policy_definition") or {}
    except ManagementError as error:
        found.management_error = str(error)
        return
    found.management = True


async def survey(
    settings: CronSettings, timeouts: Timeouts, watch: float, management_url: str | None
) -> Survey:
    """Gather the survey: AMQP always, the management API when its URL is given."""
    found = await over_amqp(settings, timeouts, watch)
    if management_url:
        await with_management(found, management_url)
    return found
