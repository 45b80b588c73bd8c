"""The HTTP API's tests: a real monitor serving it on 127.0.0.1, with a token of each role."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.dashboard import free_port
from tests.namespace import TestBroker
from tests.scheduling import every, write_schedules
from warren_cron.monitor import Monitor

#: One token per role; the admin's is read from the environment, the others are hashed.
TOKENS = {
    "viewer": "viewer-token-0123456789abcdef",
    "operator": "operator-token-0123456789abcdef",
    "admin": "admin-token-0123456789abcdef",
}
ADMIN_ENV = "WARREN_TEST_API_ADMIN_TOKEN"
SPEC = {"name": "rt", "every": "1h", "task": "noop"}
StartMonitor = Callable[..., Awaitable[Monitor]]


def token_settings() -> list[dict[str, Any]]:
    """CRON_API_TOKENS of the tests: a dashboard user, a cron job's caller, a deployer."""
    return [
        {"name": "grafana", "role": "viewer", "sha256": _sha(TOKENS["viewer"])},
        {"name": "oncall", "role": "operator", "sha256": _sha(TOKENS["operator"])},
        {"name": "deployer", "role": "admin", "secret": {"env": ADMIN_ENV}},
    ]


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def bearer(role: str) -> dict[str, str]:
    """The Authorization header of the token of ``role``."""
    return {"Authorization": f"Bearer {TOKENS[role]}"}


@dataclass
class Api:
    """The API of a running monitor at ``url`` (``.../api/v1``)."""

    url: str
    monitor: Monitor
    http: aiohttp.ClientSession

    async def call(
        self, method: str, path: str, role: str | None = "admin", **kwargs: Any
    ) -> tuple[int, Any]:
        """Send a request as ``role`` (None: no token); the status and the JSON answer."""
        headers = {**(bearer(role) if role else {}), **kwargs.pop("headers", {})}
        async with self.http.request(method, self.url + path, headers=headers, **kwargs) as got:
            assert got.content_type == "application/json", await got.text()
            return got.status, await got.json()


@asynccontextmanager
async def served_api(
    broker: TestBroker,
    run_monitor: StartMonitor,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    **overrides: Any,
) -> AsyncIterator[Api]:
    """A monitor serving the API, with the file schedule ``from-file``, and a client."""
    monkeypatch.setenv(ADMIN_ENV, TOKENS["admin"])
    path = tmp_path / "schedules.toml"
    schedules = write_schedules(broker, path, every("from-file", "1h"))
    monitor = await run_monitor(
        schedules=schedules.schedules,
        schedules_file=path,
        dashboard_port=free_port(),
        api_tokens=token_settings(),
        **overrides,
    )
    async with aiohttp.ClientSession() as http:
        yield Api(api_url(monitor), monitor, http)


def api_url(monitor: Monitor) -> str:
    """Where the monitor serves the API."""
    assert monitor.dashboard is not None and monitor.dashboard.url is not None
    return monitor.dashboard.url + "api/v1"
