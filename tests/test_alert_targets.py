"""Each alert target against a real local receiver: the payload its service documents,
resolves where it has them, secrets by reference that never reach a log, hostile receivers.

The formats checked: Slack incoming webhooks (``text`` and Block Kit ``blocks``: a header of
``plain_text`` at most 150 characters, ``section`` blocks of ``mrkdwn`` at most 3000, at most
50 blocks); PagerDuty Events API v2 (``routing_key``, ``event_action`` trigger/resolve,
``dedup_key`` at most 255, ``payload.summary`` at most 1024, ``source``, ``severity`` one of
critical/error/warning/info, ISO 8601 ``timestamp``; 202 with ``status``/``message``/
``dedup_key``); Opsgenie Alert API v2 (``Authorization: GenieKey``, ``message`` at most 130,
``alias`` at most 512, ``description`` at most 15000, ``details`` a string map, ``priority``
P1-P5; close by ``/v2/alerts/<alias>/close?identifierType=alias``; 202 with ``result``,
``took``, ``requestId``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, MutableMapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import aiohttp
import orjson
import pytest
from structlog.testing import capture_logs

from tests.alert_receiver import Received, Receiver, echo, receiving
from tests.echo import leaks
from warren_cron.errors import SettingsError
from warren_cron.headers import H_ATTEMPTS, H_FAILED_AT, H_REASON, H_SCHEDULE
from warren_cron.monitor.alerts import AlertSender, Condition, Digest
from warren_cron.monitor.configured import configured_targets
from warren_cron.monitor.events import EventWebhook
from warren_cron.monitor.paging import Opsgenie, PagerDuty
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.monitor.targets import GenericWebhook, Slack, Target
from warren_cron.records import record_from
from warren_cron.runtime.settings import load_settings
from warren_cron.signing import SIGNATURE_HEADER, SignatureError, verify_signature
from warren_cron.webhook import SecretRef

SECRET = "R0UTING-KEY-0123456789abcdef0123"
DOWN = Condition("scheduler.down", True, "scheduler: DOWN: no scheduler leads for 60s")
BACK = Condition("scheduler.down", False, "scheduler back")
SEVERITIES = {"critical", "error", "warning", "info"}


def failure(n: int = 0, error: str = "boom") -> Any:
    """A failed record of schedule ``nightly``."""
    headers = {H_REASON: "retries-exhausted", H_ATTEMPTS: 4, H_SCHEDULE: "nightly"}
    headers[H_FAILED_AT] = "2026-01-01T00:00:00+00:00"
    body = orjson.dumps({"task": "job", "error": error})
    return record_from(body, headers, "final", "cron_scheduler", {"message_id": f"r{n}"})


def digest(*changes: Condition, failures: int = 0) -> Digest:
    """A digest of ``changes`` and ``failures`` failed records."""
    pending = Digest()
    for change in changes:
        pending.add_condition(change, 0.0)
    for n in range(failures):
        pending.add_failure(failure(n), 0.0)
    return pending


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    """A client session like the monitor's."""
    async with aiohttp.ClientSession() as client:
        yield client


async def deliver(
    session: aiohttp.ClientSession, target: Target, pending: Digest, **settings: Any
) -> bool:
    """Send ``pending`` to ``target`` once, as the monitor's sender does; True when delivered."""
    values = {"namespace": "prod", "alert_timeout_seconds": 1.0, **settings}
    sender = AlertSender(MonitorSettings(**values), session, target)
    sender.pending = pending
    await sender.flush()
    return sender.sent == 1


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> SecretRef:
    """The secret in the monitor's environment, as ``{"env": "ALERT_KEY"}``."""
    monkeypatch.setenv("ALERT_KEY", SECRET)
    return SecretRef(env="ALERT_KEY")


async def test_slack_gets_a_text_fallback_and_blocks_within_slacks_limits(session: Any) -> None:
    """A header block, one mrkdwn section per line; markup in errors is escaped."""
    async with receiving(Receiver()) as slack:
        bad = Condition("no-success:<!channel>", True, "no success of <!channel> & co in 1h")
        assert await deliver(
            session, Slack(f"{slack.url}/services/T0/B0/tok"), digest(bad, failures=3)
        )
    [got] = slack.requests
    message = got.json()
    assert got.method == "POST" and got.headers["Content-Type"] == "application/json"
    assert isinstance(message["text"], str) and "&lt;!channel&gt; &amp; co" in message["text"]
    header, *sections = message["blocks"]
    assert header == {
        "type": "header",
        "text": {"type": "plain_text", "text": "warren prod: 4 alert(s)"},
    }
    assert len(message["blocks"]) <= 50 and len(sections) == 2
    for block in sections:
        assert block["type"] == "section" and block["text"]["type"] == "mrkdwn"
        assert 0 < len(block["text"]["text"]) <= 3000 and "<!channel>" not in block["text"]["text"]


def pagerduty_answer(request: Received) -> tuple[int, bytes]:
    """PagerDuty's documented answer to an accepted event."""
    answer = {
        "status": "success",
        "message": "Event processed",
        "dedup_key": request.json()["dedup_key"],
    }
    return 202, orjson.dumps(answer)


def assert_pagerduty_trigger(event: dict[str, Any]) -> None:
    """The fields and types Events API v2 documents for a trigger."""
    assert event["event_action"] == "trigger" and event["routing_key"] == SECRET
    assert isinstance(event["dedup_key"], str) and len(event["dedup_key"]) <= 255
    payload = event["payload"]
    assert isinstance(payload["summary"], str) and 0 < len(payload["summary"]) <= 1024
    assert payload["source"] == "prod" and payload["severity"] in SEVERITIES
    assert datetime.fromisoformat(payload["timestamp"]).tzinfo is not None
    assert isinstance(payload["custom_details"], dict)


async def test_pagerduty_triggers_with_a_dedup_key_and_resolves_the_same_one(
    session: Any, secret_env: SecretRef
) -> None:
    """scheduler.down triggers critical; its recovery resolves by the same dedup_key; a
    digest of failures triggers one event of the configured severity."""
    async with receiving(Receiver(pagerduty_answer)) as pd:
        target = PagerDuty(f"{pd.url}/v2/enqueue", secret_env, "warning")
        assert await deliver(session, target, digest(DOWN, failures=2))
        assert await deliver(session, target, digest(BACK))
    trigger, failures, resolve = [r.json() for r in pd.requests]
    assert {r.target for r in pd.requests} == {"/v2/enqueue"}
    assert_pagerduty_trigger(trigger)
    assert_pagerduty_trigger(failures)
    assert (
        trigger["payload"]["severity"] == "critical"
        and trigger["dedup_key"] == "warren/prod/scheduler.down"
    )
    assert (
        failures["payload"]["severity"] == "warning"
        and failures["payload"]["custom_details"]["count"] == 2
    )
    assert resolve == {
        "routing_key": SECRET,
        "event_action": "resolve",
        "dedup_key": trigger["dedup_key"],
    }


def opsgenie_answer(_: Received) -> tuple[int, bytes]:
    """Opsgenie's documented answer: the request is queued."""
    return 202, orjson.dumps(
        {"result": "Request will be processed", "took": 0.1, "requestId": "r-1"}
    )


async def test_opsgenie_creates_by_alias_and_closes_by_that_alias(
    session: Any, tmp_path: Path
) -> None:
    """The key comes from a file (its newline dropped); create then close by alias."""
    (tmp_path / "og").write_text(SECRET + "\n")
    async with receiving(Receiver(opsgenie_answer)) as og:
        target = Opsgenie(og.url, SecretRef(file=str(tmp_path / "og")), "P3")
        assert await deliver(session, target, digest(DOWN, failures=1))
        assert await deliver(session, target, digest(BACK))
    create, failures, close = og.requests
    for request in og.requests:
        assert request.headers["Authorization"] == f"GenieKey {SECRET}"
    for alert in (create.json(), failures.json()):
        assert create.target == failures.target == "/v2/alerts"
        assert 0 < len(alert["message"]) <= 130 and len(alert["alias"]) <= 512
        assert len(alert["description"]) <= 15000 and alert["priority"] in {
            "P1",
            "P2",
            "P3",
            "P4",
            "P5",
        }
        assert all(isinstance(v, str) for v in alert["details"].values())
    assert create.json()["priority"] == "P1" and failures.json()["priority"] == "P3"
    path, _, query = close.target.partition("?")
    assert query == "identifierType=alias"
    assert (
        unquote(path.removeprefix("/v2/alerts/").removesuffix("/close")) == create.json()["alias"]
    )
    assert close.json()["note"].startswith("RESOLVED: ")


async def test_event_webhook_posts_signed_events_a_receiver_can_verify(
    session: Any, secret_env: SecretRef
) -> None:
    """run.failed and scheduler.down as events, signed like http tasks; a changed body fails."""
    async with receiving(Receiver()) as hook:
        target = EventWebhook(f"{hook.url}/hooks/warren?src=1", secret_env)
        assert await deliver(
            session, target, digest(DOWN, Condition("failed-queue", True, "deep"), failures=1)
        )
    [got] = hook.requests
    header = got.headers[SIGNATURE_HEADER]
    verify_signature(header, SECRET, "POST", got.target, got.body)
    with pytest.raises(SignatureError):
        verify_signature(header, SECRET, "POST", got.target, got.body + b" ")
    body = got.json()
    assert [(e["type"], e["status"]) for e in body["events"]] == [
        ("scheduler.down", "firing"),
        ("failed_queue.threshold", "firing"),
        ("run.failed", "firing"),
    ]
    assert body["events"][2]["data"]["schedule"] == "nightly" and body["omitted_failures"] == 0


def assert_no_secret_logged(logs: list[MutableMapping[str, Any]]) -> None:
    """No log line holds the secret, in any field, in any form an echo may take."""
    assert logs and leaks(repr(logs), [SECRET]) == []


@pytest.mark.parametrize(
    "receiver",
    [Receiver(echo), Receiver(lambda _: (500, SECRET.encode())), Receiver(delay=3.0)],
    ids=["echoes-the-secret", "answers-500", "slower-than-the-timeout"],
)
async def test_a_hostile_receiver_is_retried_and_never_gets_the_secret_into_a_log(
    session: Any, secret_env: SecretRef, receiver: Receiver
) -> None:
    """An echo, a 500 and a hang are all undelivered alerts; no log line holds the key."""
    async with receiving(receiver) as hostile:
        target = PagerDuty(f"{hostile.url}/v2/enqueue", secret_env, "error")
        with capture_logs() as logs:
            assert not await deliver(session, target, digest(DOWN))
    assert_no_secret_logged(logs)
    assert [e["event"] for e in logs][-1] == "alert lost at shutdown"


async def test_an_unset_secret_is_named_not_sent_and_the_receiver_gets_nothing(
    session: Any,
) -> None:
    """The log names the variable to set; nothing is posted without it."""
    async with receiving(Receiver()) as hook:
        with capture_logs() as logs:
            assert not await deliver(
                session, EventWebhook(hook.url, SecretRef(env="ALERT_KEY_UNSET")), digest(DOWN)
            )
    assert hook.requests == []
    [error] = [e for e in logs if e["event"].startswith("alert not sent")]
    assert "ALERT_KEY_UNSET" in error["error"] and "CRON_ALERT_EVENTS_SECRET" in error["error"]


def test_every_configured_target_is_built_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each URL or key set adds its target; none set: alerts are only logged."""
    assert configured_targets(MonitorSettings()) == []
    settings = MonitorSettings(
        alert_webhook_url="https://hooks.example/a",
        alert_slack_webhook_url="https://hooks.slack.com/services/T/B/secret",
        alert_pagerduty_routing_key="env:PD",
        alert_opsgenie_api_key="file:/run/secrets/og",
        alert_events_url="https://ops.example/events",
        alert_events_secret="env:EV",
    )
    targets = configured_targets(settings)
    assert [type(t) for t in targets] == [GenericWebhook, Slack, PagerDuty, Opsgenie, EventWebhook]
    assert all("secret" not in t.safe for t in targets)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"CRON_ALERT_PAGERDUTY_ROUTING_KEY": SECRET}, "CRON_ALERT_PAGERDUTY_ROUTING_KEY"),
        ({"CRON_ALERT_EVENTS_URL": "https://ops.example/e"}, "CRON_ALERT_EVENTS_SECRET"),
        ({"CRON_ALERT_OPSGENIE_PRIORITY": "P9"}, "CRON_ALERT_OPSGENIE_PRIORITY"),
    ],
    ids=["a-key-given-not-referenced", "events-unsigned", "unknown-priority"],
)
def test_bad_alert_settings_are_refused_naming_the_variable_never_the_secret(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], named: str
) -> None:
    """A key pasted in place of a reference is refused without being echoed."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SettingsError) as refused:
        load_settings(MonitorSettings)
    assert named in str(refused.value) and SECRET not in str(refused.value)


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ('{"env": "PD_KEY"}', SecretRef(env="PD_KEY")),
        ('{"file": "/run/secrets/pd"}', SecretRef(file="/run/secrets/pd")),
        ("env:PD_KEY", SecretRef(env="PD_KEY")),
        ("file:/run/secrets/pd", SecretRef(file="/run/secrets/pd")),
    ],
    ids=["object-env", "object-file", "older-env", "older-file"],
)
def test_an_alert_key_takes_the_reference_object_as_api_tokens_do_and_the_older_string(
    monkeypatch: pytest.MonkeyPatch, given: str, meant: SecretRef
) -> None:
    """The documented {"env": ...} / {"file": ...} object works in a CRON_ALERT_* variable,
    as in CRON_API_TOKENS and http payloads; the older env:NAME string still does."""
    monkeypatch.setenv("CRON_ALERT_PAGERDUTY_ROUTING_KEY", given)
    assert load_settings(MonitorSettings).alert_pagerduty_routing_key == meant


@pytest.mark.parametrize(
    "given",
    ['{"env": "PD_KEY", "file": "/x"}', '{"env": "1bad"}', '{"env": ', "env:", "hunter2"],
    ids=["both-sources", "bad-name", "broken-json", "empty-name", "a-secret-itself"],
)
def test_a_malformed_alert_key_reference_is_refused_naming_the_variable_and_the_forms(
    monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    """A reference that names no one variable or file is refused at start with what to
    give, never echoing the value."""
    monkeypatch.setenv("CRON_ALERT_OPSGENIE_API_KEY", given)
    with pytest.raises(SettingsError) as refused:
        load_settings(MonitorSettings)
    text = str(refused.value)
    assert "CRON_ALERT_OPSGENIE_API_KEY" in text and "hunter2" not in text
