"""The chaos run: every kind of fault once in the suite, and the script as operators run it."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.harness import FaultScenario
from warren_cron.faultkit.driver import FAULTS, Chaos, ChaosConfig
from warren_cron.plan import RetryPlan

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.faults
async def test_a_chaos_run_with_every_fault_loses_no_task(scenario: FaultScenario) -> None:
    """400 mixed tasks on quorum queues through every fault: each completes or fails."""
    scenario.broker.queue_type = "quorum"
    scenario.plan = RetryPlan((200, 400))
    await scenario.prepare()
    seed = random.SystemRandom().randrange(1_000_000)
    config = ChaosConfig(
        tasks=400,
        workers=2,
        seed=seed,
        pause=(0.5, 1.5),
        sequence=(
            "kill-broker",
            "kill-worker",
            "close-connections",
            "term-worker",
            "restart-broker",
        ),
        task_seconds=0.2,
        quiet_seconds=120,
    )
    result = await Chaos(scenario, config).run()
    assert result.ok, f"seed {seed}\n{result.table()}"
    assert {name for _, name in result.faults} == set(FAULTS), f"seed {seed}\n{result.table()}"


def chaos_script(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``scripts/chaos.py`` to completion."""
    return subprocess.run(
        [sys.executable, "scripts/chaos.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.faults
def test_the_chaos_script_prints_its_seed_and_ledger_and_exits_0() -> None:
    """A small run of the script: its own node, a seed to repeat it, the table, exit code 0."""
    result = chaos_script("--tasks", "60", "--seed", "5", "--faults", "kill-worker", "--rate", "20")
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert "seed 5" in result.stdout
    assert "lost               0" in result.stdout and "chaos: OK" in result.stdout


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--faults", "unplug-cable"], "unknown fault(s) unplug-cable"),
        (["--tasks", "0"], "--tasks >= 1"),
        (["--pause", "3", "1"], "--pause needs"),
    ],
)
def test_chaos_script_usage_errors_exit_2(args: list[str], why: str) -> None:
    """A bad option is named in the error, with exit code 2, before any node starts."""
    result = chaos_script(*args, timeout=30)
    assert result.returncode == 2 and why in result.stderr
