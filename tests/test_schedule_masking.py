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
from warren_cron.redaction import masked_url
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.masking import MASK, kept_secrets, refuse_masks, shown_spec

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


def test_a_masked_url_sent_to_another_host_is_refused() -> None:
    """A URL with the mask for another host cannot take the stored password over to it."""
    moved = masked_url(URL).replace("hooks.example", "evil.example")
    with pytest.raises(InvalidSchedule) as refused:
        kept_secrets(stored(), {"payload": {**PAYLOAD, "url": moved}})
    assert "payload.url" in str(refused.value)
    assert "send the URL with its credentials again" in str(refused.value)


MOVED = [
    "https://evil.example/in",  # another host
    "http://hooks.example/in",  # another scheme: the secret would go in clear
    "https://hooks.example:8443/in",  # another port, another service
    f"https://ops:{MASK}@evil.example/in?api_key={MASK}&team=blue",
]


@pytest.mark.parametrize("url", MOVED)
def test_a_masked_header_does_not_follow_the_url_to_another_destination(url: str) -> None:
    """The Authorization sent back as the mask with the URL moved elsewhere is refused, naming
    the header and asking for the value: the stored credential would go to the new host."""
    payload = {**shown_spec(stored())["payload"], "url": url}
    with pytest.raises(InvalidSchedule) as refused:
        kept_secrets(stored(), {"payload": payload})
    message = str(refused.value)
    assert "payload.headers.Authorization" in message and "send the value itself" in message
    assert "another host must not inherit" in message and SECRET not in message


def test_the_masks_keep_their_secrets_on_the_same_destination_with_another_path() -> None:
    """Scheme, host and port unchanged (443 said or not): the password, the query key and the
    header keep the stored values under a new path and a new harmless query value."""
    url = f"https://ops:{MASK}@HOOKS.example:443/v2/in?api_key={MASK}&team=red"
    payload = {**shown_spec(stored())["payload"], "url": url}
    kept = kept_secrets(stored(), {"payload": payload})["payload"]
    assert kept["url"] == (
        f"https://ops:{PASSWORD}@HOOKS.example:443/v2/in?api_key={QUERY_KEY}&team=red"
    )
    assert kept["headers"]["Authorization"] == f"Bearer {SECRET}"


def test_a_masked_query_value_of_a_name_that_held_none_is_refused() -> None:
    """The mask for a query name the stored URL did not have would be sent as the value."""
    url = masked_url(URL) + f"&sig={MASK}"
    with pytest.raises(InvalidSchedule) as refused:
        kept_secrets(stored(), {"payload": {**PAYLOAD, "url": url}})
    assert "payload.url" in str(refused.value) and "holds none" in str(refused.value)


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


#: The payload as a read shows it, pointed at another host: the mask would carry the secret.
MOVED_PAYLOAD = {
    "url": "https://evil.example/in",
    "headers": {"Authorization": MASK, "Accept": "application/json"},
}


@pytest.mark.broker
async def test_the_api_refuses_a_masked_header_sent_to_another_host(api: Api) -> None:
    """PUT with the URL moved to another host and the Authorization sent back masked is a 400
    naming the header; the schedule keeps its URL. On the same host, a new path keeps it."""
    assert (await api.call("POST", "/schedules", json={"spec": SPEC}))[0] == 201
    body = {"version": 1, "changes": {"payload": MOVED_PAYLOAD}}
    status, refused = await api.call("PUT", "/schedules/hook", json=body)
    message = refused["error"]["message"]
    assert status == 400 and "payload.headers.Authorization" in message, refused
    assert "send the value itself" in message and SECRET not in message
    held = await api.monitor.dashboard.api.admin.get("hook")  # type: ignore[union-attr]
    assert (held.version, held.spec.payload) == (1, PAYLOAD)
    shown = (await api.call("GET", "/schedules/hook", role="viewer"))[1]["spec"]["payload"]
    moved = {**shown, "url": shown["url"].replace("/in?", "/v2/in?")}
    body = {"version": 1, "changes": {"payload": moved}}
    assert (await api.call("PUT", "/schedules/hook", json=body))[0] == 200
    held = await api.monitor.dashboard.api.admin.get("hook")  # type: ignore[union-attr]
    assert held.spec.payload == {**PAYLOAD, "url": URL.replace("/in?", "/v2/in?")}


def _toml_file(path: Path, url: str) -> Path:
    """A schedules file naming ``hook`` as a read shows it, its URL ``url``."""
    path.write_text(
        '[[schedule]]\nname = "hook"\nevery = "1h"\ntask = "http"\n'
        f'[schedule.payload]\nurl = "{url}"\njson = {{ n = 1 }}\n'
        f'[schedule.payload.headers]\nAuthorization = "{MASK}"\n'
        'X-Signing-Token = { env = "HOOK_TOKEN" }\nAccept = "application/json"\n'
    )
    return path


@pytest.mark.broker
async def test_the_command_and_apply_refuse_a_masked_header_sent_to_another_host(
    broker: TestBroker, tmp_path: Path
) -> None:
    """``schedules update`` and ``schedules apply`` with the URL moved elsewhere and the
    header masked exit 2 naming it, and nothing changes; ``apply`` of the schedule as read,
    on its own host, keeps the secret."""
    own = tmp_path / "schedules.toml"
    write_schedules(broker, own, every("from-file", "1h"))
    made = await schedules_script(broker, own, "create", stdin=orjson.dumps(SPEC).decode())
    assert made.returncode == 0, made.stderr
    update = ("update", "hook", "--if-version", "1")
    done = await schedules_script(
        broker, own, *update, stdin=orjson.dumps({"payload": MOVED_PAYLOAD}).decode()
    )
    assert done.returncode == 2 and "payload.headers.Authorization" in done.stderr, done
    moved = _toml_file(tmp_path / "moved.toml", "https://evil.example/in")
    done = await schedules_script(broker, own, "apply", str(moved))
    assert done.returncode == 2 and "hook: payload.headers.Authorization" in done.stderr, done
    assert "another host must not inherit" in done.stderr and SECRET not in done.stderr
    got = json_out(await schedules_script(broker, own, "get", "hook", "--json"))
    assert got["version"] == 1
    same = _toml_file(tmp_path / "same.toml", masked_url(URL))
    done = await schedules_script(broker, own, "apply", str(same))
    assert done.returncode == 0 and done.stdout.split()[:2] == ["adopt", "hook"], done
    assert SECRET not in done.stdout + done.stderr
