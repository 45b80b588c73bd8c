"""A credential written into a runtime schedule is masked on every read, and an update that
sends the mask back keeps the stored credential."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.api import Api
from tests.failed_records import json_out
from tests.namespace import TestBroker
from tests.pausing import schedules_script
from tests.scheduling import every, write_schedules
from warren_cron.errors import InvalidSchedule
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.masking import MASK, kept_secrets, masked_url, refuse_masks, shown_spec

SECRET = "s3cr3t-bearer-0123456789"
PASSWORD = "hunter2-pass"
QUERY_KEY = "qk-0123456789abcdef"
URL = f"https://ops:{PASSWORD}@hooks.example/in?api_key={QUERY_KEY}&team=blue"
PAYLOAD: dict[str, Any] = {
    "url": URL,
    "headers": {
        "Authorization": f"Bearer {SECRET}",
        "X-Signing-Token": {"env": "HOOK_TOKEN"},
        "Accept": "application/json",
    },
    "json": {"n": 1},
}
SPEC = {"name": "hook", "every": "1h", "task": "http", "payload": PAYLOAD}


def stored() -> ScheduleSpec:
    """The schedule as the store holds it: credentials as written."""
    return ScheduleSpec.model_validate(SPEC)


def test_a_read_masks_literal_credentials_and_shows_references_as_they_are() -> None:
    """The Authorization value, the URL's password and a key in its query are masked; a
    reference, a plain header and a harmless query value are shown."""
    shown = shown_spec(stored())["payload"]
    assert shown["headers"] == {
        "Authorization": MASK,
        "X-Signing-Token": {"env": "HOOK_TOKEN"},
        "Accept": "application/json",
    }
    assert shown["url"] == f"https://ops:{MASK}@hooks.example/in?api_key={MASK}&team=blue"
    text = str(shown)
    assert SECRET not in text and PASSWORD not in text and QUERY_KEY not in text


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("https://h.example/p", "https://h.example/p"),
        ("https://user@h.example/p", "https://user@h.example/p"),
        ("https://h.example/p?token=abc&x=&sig=", f"https://h.example/p?token={MASK}&x=&sig="),
        ("https://h.example/p?Password=a#frag", f"https://h.example/p?Password={MASK}#frag"),
    ],
)
def test_a_url_keeps_everything_but_its_credentials(url: str, masked: str) -> None:
    """Only a password and the values of sensitive query names change; empty ones stay."""
    assert masked_url(url) == masked


def test_an_update_sending_the_mask_back_keeps_the_stored_credentials() -> None:
    """The payload as read, with a field changed, is stored with the secrets as they were."""
    shown = shown_spec(stored())["payload"]
    changed = {**shown, "json": {"n": 2}}
    kept = kept_secrets(stored(), {"payload": changed})["payload"]
    assert kept == {**PAYLOAD, "json": {"n": 2}}


def test_a_mask_on_a_header_that_holds_no_secret_is_refused_naming_it() -> None:
    """The mask sent for Accept (stored as a plain value) or for a new header would become
    the credential: refused, saying what to send instead."""
    for header in ("Accept", "X-Api-Key"):
        payload = {**PAYLOAD, "headers": {**PAYLOAD["headers"], header: MASK}}
        with pytest.raises(InvalidSchedule) as refused:
            kept_secrets(stored(), {"payload": payload})
        assert f"payload.headers.{header}" in str(refused.value)
        assert "send the value itself" in str(refused.value)


def test_a_masked_url_that_is_not_the_stored_one_is_refused() -> None:
    """A URL with the mask for another host (or a changed path) cannot take the stored
    password over to it."""
    moved = masked_url(URL).replace("hooks.example", "evil.example")
    with pytest.raises(InvalidSchedule) as refused:
        kept_secrets(stored(), {"payload": {**PAYLOAD, "url": moved}})
    assert "payload.url" in str(refused.value) and "exactly as read" in str(refused.value)


def test_a_new_schedule_may_not_hold_the_mask_as_a_credential() -> None:
    """A create has nothing stored: the mask anywhere a credential goes is refused."""
    with pytest.raises(InvalidSchedule):
        refuse_masks("hook", {**PAYLOAD, "headers": {"Authorization": MASK}})
    with pytest.raises(InvalidSchedule):
        refuse_masks("hook", {**PAYLOAD, "url": masked_url(URL)})
    refuse_masks("hook", PAYLOAD)  # credentials as they are: accepted


@pytest.mark.broker
async def test_the_api_masks_on_read_and_a_put_round_trip_keeps_the_secret(api: Api) -> None:
    """GET shows the mask, never the credential; PUT of the payload as read keeps it (the
    store still holds it); the mask for a header that had none is a 400 naming it."""
    status, made = await api.call("POST", "/schedules", json={"spec": SPEC})
    assert status == 201 and SECRET not in str(made)
    status, got = await api.call("GET", "/schedules/hook", role="viewer")
    assert status == 200
    assert got["spec"]["payload"]["headers"]["Authorization"] == MASK
    assert got["spec"]["payload"]["headers"]["X-Signing-Token"] == {"env": "HOOK_TOKEN"}
    text = str(got)
    assert SECRET not in text and PASSWORD not in text and QUERY_KEY not in text
    payload = {**got["spec"]["payload"], "json": {"n": 2}}
    body = {"version": got["version"], "changes": {"payload": payload}}
    status, moved = await api.call("PUT", "/schedules/hook", json=body)
    assert (status, moved["version"]) == (200, 2), moved
    held = await api.monitor.dashboard.api.admin.get("hook")  # type: ignore[union-attr]
    assert held.spec.payload == {**PAYLOAD, "json": {"n": 2}}
    bad = {**payload, "headers": {**payload["headers"], "Accept": MASK}}
    status, refused = await api.call(
        "PUT", "/schedules/hook", json={"version": 2, "changes": {"payload": bad}}
    )
    assert status == 400 and "payload.headers.Accept" in refused["error"]["message"], refused


@pytest.mark.broker
async def test_schedules_get_masks_the_credential_in_text_and_json(
    broker: TestBroker, tmp_path: Path
) -> None:
    """``warren schedules get`` (text and --json) shows the mask, never the credential."""
    path = tmp_path / "schedules.toml"
    write_schedules(broker, path, every("from-file", "1h"))
    made = await schedules_script(broker, path, "create", stdin=orjson.dumps(SPEC).decode())
    assert made.returncode == 0, made.stderr
    got = json_out(await schedules_script(broker, path, "get", "hook", "--json"))
    assert got["spec"]["payload"]["headers"]["Authorization"] == MASK
    text = (await schedules_script(broker, path, "get", "hook")).stdout
    assert MASK in text
    for shown in (str(got), text):
        assert SECRET not in shown and PASSWORD not in shown and QUERY_KEY not in shown
