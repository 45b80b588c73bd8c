"""Sensitive header values are hidden from people; references and other headers are kept."""

from __future__ import annotations

import pytest

from warren_cron.redaction import REDACTED, redact_payload, sensitive_header


@pytest.mark.parametrize(
    "name",
    ["Authorization", "cookie", "Proxy-Authorization", "X-API-Key", "X-Auth-Token", "Secret-Id"],
)
def test_credential_headers_are_sensitive(name: str) -> None:
    """The issue's list of credential headers, in any case, counts as sensitive."""
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
