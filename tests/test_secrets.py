"""Secrets by reference: resolved when the attempt runs, only from what the operator opened."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.test_http import CTX
from tests.webhook import Endpoint, serve
from warren_cron.errors import SecretUnavailable
from warren_cron.worker.http import HttpHandler

Handler = Callable[..., HttpHandler]


async def test_env_and_file_references_are_sent_resolved(
    http_handler: Handler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The endpoint receives the secrets; the payload held only where they live."""
    monkeypatch.setenv("HOOK_TOKEN", "Bearer from-env")
    (tmp_path / "api-key").write_text("from-file\n")
    headers = {"Authorization": {"env": "HOOK_TOKEN"}, "X-Api-Key": {"file": f"{tmp_path}/api-key"}}
    call = http_handler(http_secret_env="HOOK_*", http_secret_dir=tmp_path)
    with serve(Endpoint()) as endpoint:
        await call({"url": endpoint.url, "headers": headers}, CTX)
    [(_, received, _)] = endpoint.requests
    assert (received["Authorization"], received["X-Api-Key"]) == ("Bearer from-env", "from-file")


async def test_a_rotated_file_is_read_again_on_the_next_attempt(
    http_handler: Handler, tmp_path: Path
) -> None:
    """Secrets are read per attempt: a new value takes effect without a restart."""
    secret = tmp_path / "token"
    call = http_handler(http_secret_dir=tmp_path)
    payload = {"headers": {"X-Token": {"file": str(secret)}}}
    with serve(Endpoint()) as endpoint:
        for value in ("old", "new"):
            secret.write_text(value)
            await call({**payload, "url": endpoint.url}, CTX)
    assert [headers["X-Token"] for _, headers, _ in endpoint.requests] == ["old", "new"]


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        ({"env": "HOOK_MISSING"}, "not set in the worker's environment"),
        ({"env": "CRON_AMQP_URL"}, "not among CRON_HTTP_SECRET_ENV"),
        ({"file": "/etc/hostname"}, "outside CRON_HTTP_SECRET_DIR"),
        ({"file": "{dir}/../escape"}, "outside CRON_HTTP_SECRET_DIR"),
        ({"file": "{dir}/missing"}, "No such file"),
        ({"file": "{dir}/two-lines"}, "not printable ASCII on one line"),
    ],
)
async def test_an_unresolvable_reference_fails_at_once_and_sends_nothing(
    http_handler: Handler, tmp_path: Path, ref: dict[str, str], why: str
) -> None:
    """Missing, not opened to tasks, or unfit for a header: terminal, ``secret-unavailable``."""
    (tmp_path / "two-lines").write_text("a\nb\n")
    ref = {key: value.replace("{dir}", str(tmp_path)) for key, value in ref.items()}
    call = http_handler(http_secret_env="HOOK_*", http_secret_dir=tmp_path)
    with serve(Endpoint()) as endpoint, pytest.raises(SecretUnavailable, match=why) as caught:
        await call({"url": endpoint.url, "headers": {"Authorization": ref}}, CTX)
    assert endpoint.requests == [] and caught.value.reason == "secret-unavailable"
