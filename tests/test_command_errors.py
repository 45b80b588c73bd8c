"""The ``warren`` command on input nobody should give: one clear line saying what to fix and
the exit code of the command's other such errors, never a traceback."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from tests.failed_records import run_warren
from tests.namespace import TestBroker

pytestmark = pytest.mark.broker


def nested(depth: int) -> Any:
    """A JSON list nested ``depth`` deep."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def clear(stderr: str) -> bool:
    """No traceback, no critical ``uncaught exception`` line."""
    return "Traceback" not in stderr and "uncaught exception" not in stderr


def test_a_delay_past_any_time_is_a_usage_error(broker: TestBroker) -> None:
    """``warren enqueue noop --delay 99999999999999d``: exit 2 naming the longest delay."""
    result = run_warren(broker, "enqueue", "noop", "--delay", "99999999999999d")
    assert result.returncode == 2 and clear(result.stderr), result.stderr
    assert "--delay" in result.stderr and "8.5 years" in result.stderr


def test_a_schedule_nested_too_deep_is_refused_naming_the_limit(broker: TestBroker) -> None:
    """``warren schedules create`` of a payload nested 300 deep (and 100): exit 2 saying how
    deep a payload may nest."""
    for depth in (300, 100):
        spec = {"name": "deep", "every": "1h", "task": "noop", "payload": nested(depth)}
        result = run_warren(broker, "schedules", "create", stdin=json.dumps(spec))
        assert result.returncode == 2 and clear(result.stderr), result.stderr
        assert "nested more than 64 levels deep" in result.stderr


def test_api_tokens_that_are_no_json_name_the_variable_not_its_value(broker: TestBroker) -> None:
    """``CRON_API_TOKENS='[{'``: the monitor exits 2 naming the variable, never its value."""
    result = run_warren(broker, "monitor", "--check", CRON_API_TOKENS='[{"s3cret')
    assert result.returncode == 2 and clear(result.stderr), result.stderr
    assert "CRON_API_TOKENS: is not valid JSON" in result.stderr
    assert "s3cret" not in result.stderr + result.stdout


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process (here: this one) listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def test_a_monitor_whose_dashboard_port_is_taken_says_so_and_exits_2(
    broker: TestBroker, taken_port: int
) -> None:
    """The monitor cannot serve its dashboard: one line naming CRON_DASHBOARD_PORT, exit 2
    (a configuration to fix), no traceback."""
    port = str(taken_port)
    result = run_warren(broker, "monitor", CRON_DASHBOARD_PORT=port, CRON_METRICS_PORT="0")
    assert result.returncode == 2 and clear(result.stderr + result.stdout), result.stdout
    assert f"CRON_DASHBOARD_PORT: cannot listen on 127.0.0.1:{port}" in result.stdout  # the log
