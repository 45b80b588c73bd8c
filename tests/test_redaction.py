"""Sensitive header values are hidden from people; references and other headers are kept."""

from __future__ import annotations

import base64

import pytest

from warren_cron.redaction import (
    REDACTED,
    Scrubber,
    header_secrets,
    masked_url,
    redact_payload,
    sensitive_header,
)


@pytest.mark.parametrize(
    "name",
    ["Authorization", "cookie", "Proxy-Authorization", "X-API-Key", "X-Auth-Token", "Secret-Id"],
)
def test_credential_headers_are_sensitive(name: str) -> None:
    """Every header that carries a credential, in any case, counts as sensitive."""
    assert sensitive_header(name)


def test_plain_headers_are_not_sensitive() -> None:
    """Content-Type and the X-Cron-* headers are shown as they are."""
    assert not sensitive_header("Content-Type")
    assert not sensitive_header("X-Cron-Run-Id")


def test_redact_payload_hides_literals_and_keeps_references() -> None:
    """A literal bearer token is hidden, a secret reference and the URL are kept."""
    payload: dict[str, object] = {
        "url": "http://hooks.example/run",
        "headers": {
            "Authorization": "Bearer s3cr3t",
            "X-Api-Key": {"env": "HOOK_KEY"},
            "Accept": "application/json",
        },
    }
    shown = redact_payload(payload)
    assert shown == {
        "url": "http://hooks.example/run",
        "headers": {
            "Authorization": REDACTED,
            "X-Api-Key": {"env": "HOOK_KEY"},
            "Accept": "application/json",
        },
    }
    assert "s3cr3t" in str(payload), "the stored record is kept for replays"


def test_redact_payload_leaves_other_payloads_alone() -> None:
    """A Python task's payload without headers passes through untouched."""
    assert redact_payload({"n": 1}) == {"n": 1}
    assert redact_payload([1, 2]) == [1, 2]


def test_redact_payload_masks_a_urls_password_and_sensitive_query_values() -> None:
    """A payload with a URL and no headers: its password and token are hidden, its user,
    host, path and harmless query values shown; the payload itself is left as it is."""
    url = "https://ops:hunter2@hooks.example:8443/run?token=SECRET123&team=blue&sig=&x=1"
    payload = {"url": url, "json": {"n": 1}}
    shown = redact_payload(payload)
    assert shown == {
        "url": f"https://ops:{REDACTED}@hooks.example:8443/run?token={REDACTED}&team=blue&sig=&x=1",
        "json": {"n": 1},
    }
    assert payload["url"] == url, "the stored record is kept for replays"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        # The name as the server decodes it: access_token.
        (
            "https://h.example/p?access%5Ftoken=abc",
            f"https://h.example/p?access%5Ftoken={REDACTED}",
        ),
        ("https://h.example/p?API_KEY=abc", f"https://h.example/p?API_KEY={REDACTED}"),
        ("https://:pw@h.example/", f"https://:{REDACTED}@h.example/"),
        # Unparsable: nothing in it can be told safe to show.
        ("https://[::1/p?token=abc", REDACTED),
    ],
)
def test_masked_url_reads_names_as_the_server_does(url: str, shown: str) -> None:
    """An encoded or capitalised sensitive name is masked, an empty user's password too."""
    assert masked_url(url) == shown


@pytest.mark.parametrize("before", ["", "a", "ab", "abc", "X-Api-Key: "])
def test_a_secret_inside_a_longer_base64_text_is_scrubbed_at_any_alignment(before: str) -> None:
    """A peer that base64-encodes all it received hides the secret at one of three
    alignments: the part fixed by the secret alone is scrubbed, leaving no eight characters
    of the secret's own encoding."""
    secret = "k3y-0f-the-w0rld-42"
    text = base64.b64encode(f"{before}{secret} and more".encode()).decode()
    scrubbed = Scrubber([secret])(text)
    whole = base64.b64encode(secret.encode()).decode()
    assert REDACTED in scrubbed and not any(whole[n : n + 8] in scrubbed for n in range(12))


def test_the_credentials_inside_a_header_value_are_secrets_of_their_own() -> None:
    """A Bearer token, a Basic pair and its password, and each cookie's value are scrubbed
    when echoed alone; parts too short to be credentials are left."""
    basic = "Basic " + base64.b64encode(b"alice:pa55word").decode()
    values = ("Bearer t0ken-x", basic, "a=1; sid=s3ss10n")
    scrub = Scrubber([part for value in values for part in header_secrets(value)])
    assert scrub("t0ken-x alice:pa55word pa55word s3ss10n a=1") == "*** *** *** *** a=1"
