"""The processes deploy apart: the scheduler and the monitor load none of the worker's modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import importlib, sys
importlib.import_module(sys.argv[1])
print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] in ("worker", "scheduler"))))
"""


def loaded_by(module: str) -> set[str]:
    """The worker and scheduler modules that importing ``module`` loads, in a fresh process."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, module],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(result.stdout.split())


@pytest.mark.parametrize("module", ["worker.monitor.__main__", "scheduler.__main__"])
def test_a_process_other_than_the_worker_loads_no_worker_module(module: str) -> None:
    """Only the ``worker`` package itself and the monitor's own modules may load."""
    worker_modules = {m for m in loaded_by(module) if m.startswith("worker.")}
    assert worker_modules <= {m for m in worker_modules if m.startswith("worker.monitor")}


def test_the_monitor_loads_no_scheduler_module() -> None:
    """The monitor reads the schedules file through the contract, not the scheduler."""
    assert not {m for m in loaded_by("worker.monitor.__main__") if m.startswith("scheduler")}


def test_the_public_worker_names_still_load_for_handler_modules() -> None:
    """``from worker import task, TaskContext, PermanentError`` works as the README shows."""
    from worker import PermanentError, TaskContext, task

    assert callable(task) and TaskContext.__name__ == "TaskContext"
    assert issubclass(PermanentError, Exception)
