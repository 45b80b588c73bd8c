"""``scripts/demo.sh`` where no broker answers: it starts a node of the project's own and runs.

The URL names a free port on this host, so the machine's own broker on 5672 is neither used
nor touched; the node the script leaves running is stopped with the command it prints.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from warren_cron.cli.broker_host import listening
from warren_cron.faultkit.private_broker import free_port

# Not marked ``broker``: it needs the machine's rabbitmq-server, not a running broker, and
# starts the same node whatever release the run's other tests use.
ROOT = Path(__file__).resolve().parent.parent
#: Long enough for the ``broken`` schedule (every 15 s) to fail for good before the end.
SECONDS = "20"


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A local port nothing answers on; the project's node started there is removed after."""
    port = free_port()
    yield port
    stop = [str(ROOT / ".venv/bin/python"), "-m", "warren_cron.cli.broker_up", "--stop", str(port)]
    subprocess.run(stop, cwd=ROOT, capture_output=True, timeout=120, check=False)
    shutil.rmtree(ROOT / ".rabbitmq" / str(port), ignore_errors=True)


@pytest.mark.long
def test_the_demo_brings_up_its_own_node_where_no_broker_answers(
    silent_port: int, tmp_path: Path
) -> None:
    """No broker at the URL: demo.sh starts a private node there, runs end to end, leaves it
    running and says how to stop it; that command stops it."""
    url = f"amqp://guest:guest@127.0.0.1:{silent_port}/"
    env = {**os.environ, "CRON_AMQP_URL": url, "CRON_DASHBOARD_PORT": str(free_port())}
    env["WARREN_DEMO_LOGS"] = str(tmp_path)  # CI's other lane may run the demo meanwhile
    env.pop("CRON_TEST_AMQP_URL", None)
    demo = subprocess.run(
        ["bash", "scripts/demo.sh", "--seconds", SECONDS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = demo.stdout + demo.stderr
    assert demo.returncode == 0, output[-4000:]
    assert f"starting a RabbitMQ node of the project's own on port {silent_port}" in output
    assert "done in" in output and "succeeded" in output and "retries-exhausted" in output
    # The status table comes after the demo stopped its services, and says so; the example's
    # disabled schedule reads disabled, not active.
    assert "after the demo stopped its worker, scheduler and monitor" in output
    assert any(
        line.split()[:1] == ["nightly-report"] and "disabled" in line.split()
        for line in output.splitlines()
    ), output[-4000:]
    stop = f".venv/bin/python -m warren_cron.cli.broker_up --stop {silent_port}"
    assert f"Stop it with:  {stop}" in output
    assert listening(url), "the node the demo started was not left running"
    stopped = subprocess.run(stop.split(), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert not listening(url)
