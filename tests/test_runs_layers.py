"""The runs' operations sit below every surface: the API's run endpoints and the run pages
import each other nowhere, and the operations load no web server, template or command."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import warren_cron

TOPOLOGY = Path(warren_cron.__file__).parent
API_RUNS = ["runs", "run_scans", "run_models", "cancels"]
OPERATIONS = [
    "warren_cron.ops.runs",
    "warren_cron.ops.run_waits",
    "warren_cron.ops.runs_cancel",
    "warren_cron.ops.scans",
]


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a block."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
    return found


@pytest.mark.parametrize("module", API_RUNS)
def test_the_api_run_endpoints_import_nothing_of_the_dashboard(module: str) -> None:
    """The run endpoints reach the monitor's state through the operations, not the pages."""
    path = TOPOLOGY / "monitor" / "api" / f"{module}.py"
    bad = {name for name in imported(path) if name.startswith("warren_cron.monitor.dashboard")}
    assert not bad, f"monitor/api/{module}.py imports {sorted(bad)}"


def test_the_run_pages_import_nothing_of_the_api() -> None:
    """The run pages call the same operations as the API, not the API's modules."""
    names = imported(TOPOLOGY / "monitor" / "dashboard" / "pages" / "runs.py")
    assert not {name for name in names if name.startswith("warren_cron.monitor.api")}


def test_the_runs_operations_load_no_web_server_template_or_command() -> None:
    """Importing the runs' operations loads neither aiohttp nor Jinja2 nor any surface."""
    code = (
        "import sys\n"
        + "".join(f"import {module}\n" for module in OPERATIONS)
        + "print('\\n'.join(sys.modules))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()
    surfaces = ("aiohttp", "jinja2", "warren_cron.monitor", "warren_cron.cli")
    assert not [name for name in loaded if name.startswith(surfaces)]
