"""A finding of ``warren doctor`` and the broker-wide checks: the server's version and support,
the metadata store, the delayed-message plugin, the management API itself.

Each check reads a ``Survey`` and says what it found and what to do; the queue checks are in
``doctor_queues``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from warren_cron.ops.doctor_survey import Survey

Level = Literal["ok", "info", "warning", "problem"]
#: Worst last: the exit code is the worst level's (0 fine, 1 warnings, 2 problems).
LEVELS: tuple[Level, ...] = ("ok", "info", "warning", "problem")

#: The latest release series: the only one with community support.
LATEST = (4, 3)
#: End of community support of older series (endoflife.date's rabbitmq table).
SUPPORT_ENDED = {
    (3, 8): "2022-07-31",
    (3, 9): "2023-01-31",
    (3, 10): "2022-09-28",
    (3, 11): "2023-06-01",
    (3, 12): "2024-02-21",
    (3, 13): "2024-09-17",
    (4, 0): "2025-04-15",
    (4, 1): "2026-01-30",
}
UPGRADE = (
    "upgrade in steps: to the latest 4.2 (from 3.13 or 4.x; older 3.x go through 3.13), enable "
    "every feature flag there (rabbitmqctl enable_feature_flag all, khepri_db included), then "
    "4.3; see the upgrade notes of the RabbitMQ 4.3 page"
)


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing found, how bad it is, and what to do about it."""

    check: str
    level: Level
    summary: str
    action: str = ""
    #: Where it was learnt: "amqp", "management" or "settings".
    source: str = "amqp"


def worst(findings: list[Finding]) -> Level:
    """The worst level among ``findings``."""
    return max((f.level for f in findings), key=LEVELS.index, default="ok")


def khepri(found: Survey) -> bool | None:
    """Whether the broker's metadata store is Khepri (None: unknown without the API)."""
    series = found.server.series
    if series >= LATEST:
        return True
    return False if series < (3, 13) else found.khepri


def server_version(found: Survey) -> Finding:
    """The version, and whether its series still has community support."""
    server, series = found.server, found.server.series
    named = f"{server.product} {server.version} ({server.platform})"
    if series >= LATEST:
        return Finding("server", "ok", f"{named}: the current release series")
    ended = SUPPORT_ENDED.get(series)
    if ended is None and series[0] >= 4:
        said = f"{named}: one series behind {LATEST[0]}.{LATEST[1]}, patched for a while yet"
        return Finding("server", "info", said, UPGRADE)
    since = f" since {ended}" if ended else ""
    said = f"{named}: out of community support{since}; only the latest series has it"
    return Finding("server", "warning", said, UPGRADE)


def metadata_store(found: Survey) -> Finding:
    """Khepri or Mnesia, and what a Khepri cluster needs of its nodes."""
    store = khepri(found)
    if store is None:
        return Finding(
            "metadata-store",
            "info",
            "Khepri or Mnesia cannot be told over AMQP on 3.13 to 4.2",
            "give --management-url to read the khepri_db feature flag",
        )
    if not store:
        source = "amqp" if found.server.series < (3, 13) else "management"
        return Finding(
            "metadata-store",
            "info",
            "Mnesia: a node cut off from the others keeps serving declares alone",
            "before 4.3 (Khepri only) enable the khepri_db feature flag on 4.2",
            source,
        )
    return _khepri_nodes(found)


def _khepri_nodes(found: Survey) -> Finding:
    said = (
        "Khepri: any declare (queues, the scheduler's leader lock, and the exclusive queues of "
        "the overlap locks) needs a majority of nodes up, and an overlap lock held on a node "
        "that died stays held until that node is back"
    )
    if found.nodes == 2:
        return Finding(
            "metadata-store",
            "warning",
            said + "; with 2 nodes, losing either stops every declare",
            "run 3 (or 5) nodes",
            "management",
        )
    counted = f" ({found.nodes} node{'s' if found.nodes > 1 else ''})" if found.nodes else ""
    return Finding("metadata-store", "ok", said + counted)


def delayed_plugin(found: Survey) -> Finding:
    """The delayed-message plugin: unused by warren, archived, and broken with Khepri."""
    source = "management" if found.management else "amqp"
    if not found.delayed_plugin:
        return Finding(
            "delayed-plugin", "ok", "the delayed-message plugin is not enabled", "", source
        )
    on_khepri = bool(khepri(found))
    return Finding(
        "delayed-plugin",
        "problem" if on_khepri else "warning",
        "the delayed-message plugin is enabled: it is archived and does not work with Khepri"
        + (" (this broker's store)" if on_khepri else " (4.3's only store)"),
        "warren does not use it (its delays are TTL queues): move what else uses it to TTL "
        "queues or quorum queues' delayed retry, then rabbitmq-plugins disable "
        "rabbitmq_delayed_message_exchange",
        source,
    )


def management_api(found: Survey) -> list[Finding]:
    """Say when the management API was asked for and could not be read."""
    if found.management_error is None:
        return []
    return [
        Finding(
            "management-api",
            "warning",
            f"{found.management_error}; the findings that need it are missing",
            "fix --management-url, or leave it out for the AMQP findings alone",
            "management",
        )
    ]


def broker_findings(found: Survey) -> list[Finding]:
    """The broker-wide findings."""
    return [
        server_version(found),
        metadata_store(found),
        delayed_plugin(found),
        *management_api(found),
    ]
