"""CRON_API_TOKENS: secrets by reference or hashed, checked when the settings are read."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from warren_cron.errors import SettingsError
from warren_cron.monitor.api_tokens import ApiToken, TokenTable
from warren_cron.monitor.settings import MonitorSettings
from warren_cron.runtime.settings import load_settings

SECRET = "a-long-enough-token-0123456789"


def test_a_token_is_found_by_its_secret_from_a_file_or_its_hash(tmp_path: Path) -> None:
    """A file's secret (its final newline dropped) and a SHA-256 both match their caller;
    anything else matches none."""
    path = tmp_path / "token"
    path.write_text(SECRET + "\n")
    table = TokenTable(
        [
            ApiToken.model_validate({"name": "ci", "role": "admin", "secret": {"file": str(path)}}),
            ApiToken(name="ro", role="viewer", sha256=hashlib.sha256(b"other" * 6).hexdigest()),
        ]
    )
    ci = table.match(SECRET)
    assert ci is not None and (ci.name, ci.may("admin")) == ("ci", True)
    found = table.match("other" * 6)
    assert found is not None and (found.name, found.may("operator")) == ("ro", False)
    assert table.match(SECRET + "x") is None and table.match("") is None


@pytest.mark.parametrize(
    ("tokens", "says"),
    [
        ('[{"name": "ci", "role": "admin", "secret": {"env": "NOT_SET_ANYWHERE"}}]', "NOT_SET"),
        ('[{"name": "ci", "role": "admin", "secret": {"env": "SHORT_TOKEN"}}]', "openssl rand"),
        ('[{"name": "ci", "role": "root", "sha256": "' + "0" * 64 + '"}]', "'viewer'"),
        ('[{"name": "ci", "role": "admin"}]', '"sha256"'),
        (
            '[{"name": "ci", "role": "admin", "sha256": "' + "0" * 64 + '"}, '
            '{"name": "ci", "role": "viewer", "sha256": "' + "1" * 64 + '"}]',
            "its own",
        ),
    ],
)
def test_a_token_that_cannot_be_used_stops_the_monitor_at_start(
    monkeypatch: pytest.MonkeyPatch, tokens: str, says: str
) -> None:
    """An unset variable, a short secret, an unknown role, no secret or a name used twice:
    a settings error naming CRON_API_TOKENS and what to fix, never the secret."""
    monkeypatch.setenv("SHORT_TOKEN", "hunter2")
    monkeypatch.setenv("CRON_API_TOKENS", tokens)
    with pytest.raises(SettingsError) as raised:
        load_settings(MonitorSettings)
    assert "CRON_API_TOKENS" in str(raised.value) and says in str(raised.value)
    assert "hunter2" not in str(raised.value)
