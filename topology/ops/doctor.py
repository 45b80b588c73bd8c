"""The doctor: what matters for warren on this broker, each finding with what to do.

``diagnose`` surveys the broker (``doctor_survey``: AMQP always, the management API when its
URL is given; nothing on the broker is changed) and judges the survey (``doctor_findings`` for
the broker-wide checks, ``doctor_queues`` for the namespace's queues). The result is data: the
command renders it as a table or as JSON and exits with the worst level's code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from warren_cron.ops.doctor_findings import Finding, Level, broker_findings, worst
from warren_cron.ops.doctor_queues import queue_findings
from warren_cron.ops.doctor_survey import Survey, Timeouts, survey
from warren_cron.runtime.settings import CronSettings


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The survey and every finding judged from it, broker-wide first."""

    found: Survey
    findings: list[Finding]

    @property
    def status(self) -> Level:
        """The worst level among the findings."""
        return worst(self.findings)

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON object (``warren doctor --json``)."""
        return {
            "broker": self.found.settings.safe_url,
            "version": self.found.server.version,
            "management": self.found.management,
            "status": self.status,
            "findings": [asdict(f) for f in self.findings],
        }


def findings_of(found: Survey) -> list[Finding]:
    """Every finding, broker-wide first."""
    return [*broker_findings(found), *queue_findings(found)]


async def diagnose(
    settings: CronSettings, timeouts: Timeouts, watch: float, management_url: str | None
) -> Diagnosis:
    """Survey the broker for the namespace of ``settings`` and judge it; ``watch`` seconds of
    the failed queue's growth, the management API's findings when its URL is given."""
    found = await survey(settings, timeouts, watch, management_url)
    return Diagnosis(found, findings_of(found))
