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
        ({"env": "HOOK_MISSING"}, "not set in this process's environment"),
        ({"env": "CRON_AMQP_URL"}, "not among CRON_HTTP_SECRET_ENV"),
        ({"file": "/etc/hostname"}, "outside CRON_HTTP_SECRET_DIR"),
        ({"file": "{dir}/../escape"}, "outside CRON_HTTP_SECRET_DIR"),
        ({"file": "{dir}/missing"}, "No such file"),
        ({"file": "{dir}/two-lines"}, "holds a line break"),
    ],
)
async def test_an_unresolvable_reference_fails_at_once_and_sends_nothing(
    http_handler: Handler, tmp_path: Path, ref: dict[str, str], why: str
) -> None:
    """Missing, not opened to tasks, or unfit for a header: terminal, ``secret-unavailable``,
    naming the header."""
    (tmp_path / "two-lines").write_text("a\nb\n")
    ref = {key: value.replace("{dir}", str(tmp_path)) for key, value in ref.items()}
    call = http_handler(http_secret_env="HOOK_*", http_secret_dir=tmp_path)
    with serve(Endpoint()) as endpoint, pytest.raises(SecretUnavailable, match=why) as caught:
        await call({"url": endpoint.url, "headers": {"Authorization": ref}}, CTX)
    assert endpoint.requests == [] and caught.value.reason == "secret-unavailable"
    assert str(caught.value).startswith("header 'Authorization': secret ")


@pytest.mark.parametrize(
    ("env", "file"),
    [
        ("s3cret\n", None),  # a value copied with its line end
        ("s3cret\r\nInjected: 1", None),
        (None, "s3cret\n\n"),  # one line end is dropped, not two
        (None, "s3cret\r"),
        (None, "s3cret\nmore\n"),
    ],
)
@pytest.mark.parametrize("where", ["header", "signing_secret"])
async def test_a_secret_holding_a_line_break_fails_at_once_naming_its_use_never_the_value(
    http_handler: Handler,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    env: str | None,
    file: str | None,
    where: str,
) -> None:
    """Refused when resolved, terminal and nothing sent, instead of attempts aiohttp refuses."""
    monkeypatch.setenv("HOOK_TOKEN", env or "")
    (tmp_path / "token").write_bytes((file or "").encode())
    ref = {"env": "HOOK_TOKEN"} if env is not None else {"file": f"{tmp_path}/token"}
    payload = {"headers": {"X-Token": ref}} if where == "header" else {"signing_secret": ref}
    call = http_handler(http_secret_env="HOOK_*", http_secret_dir=tmp_path)
    with serve(Endpoint()) as endpoint, pytest.raises(SecretUnavailable) as caught:
        await call({**payload, "url": endpoint.url}, CTX)
    use = "header 'X-Token'" if where == "header" else "signing_secret"
    assert str(caught.value).startswith(f"{use}: secret ")
    assert "holds a line break" in str(caught.value) and "s3cret" not in str(caught.value)
    assert endpoint.requests == []


@pytest.mark.parametrize("content", ["tok", "tok\n", "tok\r\n"])
async def test_a_secret_file_is_sent_without_its_one_line_end(
    http_handler: Handler, tmp_path: Path, content: str
) -> None:
    """As Docker and Kubernetes secrets are written: ``echo`` ends the file with a newline."""
    (tmp_path / "token").write_bytes(content.encode())
    call = http_handler(http_secret_dir=tmp_path)
    headers = {"X-Token": {"file": f"{tmp_path}/token"}}
    with serve(Endpoint()) as endpoint:
        await call({"url": endpoint.url, "headers": headers}, CTX)
    assert [headers["X-Token"] for _, headers, _ in endpoint.requests] == ["tok"]
