"""The alert targets the monitor's settings configure, in a fixed order."""

from __future__ import annotations

from warren_cron.monitor.events import EventWebhook
from warren_cron.monitor.paging import Opsgenie, PagerDuty
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.monitor.targets import GenericWebhook, Slack, Target


def configured_targets(settings: MonitorSettings) -> list[Target]:
    """Every target that has its URL or key set; none: alerts are only logged."""
    s = settings
    targets: list[Target] = []
    if s.alert_webhook_url is not None:
        targets.append(GenericWebhook(str(s.alert_webhook_url)))
    if s.alert_slack_webhook_url is not None:
        targets.append(Slack(str(s.alert_slack_webhook_url)))
    if s.alert_pagerduty_routing_key is not None:
        key, url = s.alert_pagerduty_routing_key, str(s.alert_pagerduty_url)
        targets.append(PagerDuty(url, key, s.alert_pagerduty_severity))
    if s.alert_opsgenie_api_key is not None:
        key, url = s.alert_opsgenie_api_key, str(s.alert_opsgenie_url)
        targets.append(Opsgenie(url, key, s.alert_opsgenie_priority))
    if s.alert_events_url is not None and s.alert_events_secret is not None:
        targets.append(EventWebhook(str(s.alert_events_url), s.alert_events_secret))
    return targets
