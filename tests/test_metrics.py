"""Metrics and health endpoints served by every long-running process."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from warren_cron.faultkit.private_broker import free_port
from warren_cron.runtime.metrics import ATTEMPTS, Health, serve_metrics


@pytest.fixture
def served() -> Iterator[tuple[str, list[bool]]]:
    """A metrics server with one switchable health check."""
    state = [True]
    health = Health()
    health.add("consumer", lambda: state[0])
    port = free_port()
    server = serve_metrics(port, health, host="127.0.0.1")
    assert server is not None
    yield f"http://127.0.0.1:{port}", state
    server.shutdown()
    server.server_close()


def test_healthz_is_200_while_every_check_passes_and_503_naming_the_failing_one(
    served: tuple[str, list[bool]],
) -> None:
    """A failing check turns /healthz red and names the check."""
    url, state = served
    ok = httpx.get(f"{url}/healthz")
    assert ok.status_code == 200 and ok.json() == {"healthy": True, "failing": []}
    state[0] = False
    bad = httpx.get(f"{url}/healthz")
    assert bad.status_code == 503 and bad.json()["failing"] == ["consumer"]


def test_metrics_endpoint_exposes_attempt_counters(served: tuple[str, list[bool]]) -> None:
    """Prometheus sees attempts by task and outcome."""
    url, _ = served
    ATTEMPTS.labels(task="metrics-test", outcome="succeeded").inc()
    text = httpx.get(f"{url}/metrics").text
    assert 'cron_attempts_total{outcome="succeeded",task="metrics-test"}' in text


def test_port_zero_serves_nothing() -> None:
    """CRON_METRICS_PORT=0 turns the endpoint off."""
    assert serve_metrics(0, Health()) is None
