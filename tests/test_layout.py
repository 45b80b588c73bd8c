"""Import rules: the processes deploy apart, and the ops scripts run without the test extras."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from warren_cron.testing.processes import base_env

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
#: Top-level modules a base install (``pip install -e .``) lacks: the test suite and what the
#: ``test`` extras bring (module names, not distribution names).
TEST_ONLY = frozenset({"tests", "pytest", "_pytest", "pytest_asyncio", "testcontainers", "yaml"})
#: A sitecustomize that makes a process see the base install: importing any of TEST_ONLY fails.
BASE_INSTALL = f"""
import sys

class BaseInstall:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {sorted(TEST_ONLY)!r}:
            raise ImportError(f"{{name}} is not part of the base install")
        return None

sys.meta_path.insert(0, BaseInstall())
"""
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


@pytest.mark.parametrize("module", ["warren_cron.monitor.__main__", "warren_cron.scheduler.__main__"])
def test_a_process_other_than_the_worker_loads_no_worker_module(module: str) -> None:
    """Only the ``worker`` package itself and the monitor's own modules may load."""
    worker_modules = {m for m in loaded_by(module) if m.startswith("worker.")}
    assert worker_modules <= {m for m in worker_modules if m.startswith("warren_cron.monitor")}


def test_the_monitor_loads_no_scheduler_module() -> None:
    """The monitor reads the schedules file through the contract, not the scheduler."""
    assert not {m for m in loaded_by("warren_cron.monitor.__main__") if m.startswith("scheduler")}


def test_the_public_worker_names_still_load_for_handler_modules() -> None:
    """``from worker import task, TaskContext, PermanentError`` works as the README shows."""
    from warren_cron.worker import PermanentError, TaskContext, task

    assert callable(task) and TaskContext.__name__ == "TaskContext"
    assert issubclass(PermanentError, Exception)


def on_base_install(
    tmp_path: Path, args: list[str], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python ARGS`` from the project root where the test extras cannot be imported."""
    (tmp_path / "sitecustomize.py").write_text(BASE_INSTALL)
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_a_process_on_the_base_install_cannot_import_the_test_extras(tmp_path: Path) -> None:
    """The check below can fail: ``import pytest`` fails where the test extras are hidden."""
    result = on_base_install(tmp_path, ["-c", "import pytest"])
    assert result.returncode != 0 and "not part of the base install" in result.stderr


def test_the_chaos_script_runs_on_the_base_install(tmp_path: Path) -> None:
    """``python scripts/chaos.py --help`` needs neither the test suite nor pytest."""
    result = on_base_install(tmp_path, ["scripts/chaos.py", "--help"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "--tasks" in result.stdout


def test_every_chaoslib_module_imports_on_the_base_install(tmp_path: Path) -> None:
    """Each module of ``scripts/chaoslib`` imports where the test extras are hidden."""
    probe = (
        "import importlib, pkgutil, chaoslib\n"
        "for module in pkgutil.iter_modules(chaoslib.__path__):\n"
        "    importlib.import_module(f'chaoslib.{module.name}')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SCRIPTS)}
    result = on_base_install(tmp_path, ["-c", probe], env)
    assert result.returncode == 0, result.stderr[-3000:]


def test_chaos_workers_load_their_handler_module_on_the_base_install(tmp_path: Path) -> None:
    """A worker started with the chaos run's environment imports its ``CRON_HANDLER_MODULES``."""
    env = base_env("amqp://unused/", "unused", tmp_path / "ledger.sqlite")
    probe = (
        "import os\n"
        "from worker.registry import import_handler_modules\n"
        "import_handler_modules(os.environ['CRON_HANDLER_MODULES'].split(','))\n"
    )
    result = on_base_install(tmp_path, ["-c", probe], env)
    assert result.returncode == 0, result.stderr[-3000:]


def imported_roots(path: Path) -> set[str]:
    """Top-level names of the modules ``path`` imports (absolute imports only)."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("path", sorted(SCRIPTS.rglob("*.py")), ids=lambda p: p.name)
def test_no_script_imports_the_test_suite_or_the_test_extras(path: Path) -> None:
    """Ops scripts run on the base install: nothing under scripts/ imports tests or pytest."""
    assert not imported_roots(path) & TEST_ONLY
