"""Import rules: one import root, processes that deploy apart, layers without cycles, and test
support and ops scripts that run without the test extras."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import defaultdict
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

import warren_cron
from warren_cron.faultkit.processes import base_env

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
#: The folders the import root maps (pyproject's [tool.setuptools.package-dir]).
FOLDERS = {
    "topology": "warren_cron",
    "worker": "warren_cron.worker",
    "scheduler": "warren_cron.scheduler",
}
#: The monitor's subpackages, by the part each is.
MONITOR_PACKAGES = {"api": "api", "dashboard": "pages", "web": "web", "console": "console"}
#: The monitor's own modules, by part: its settings and status keeper below everything, the
#: alerts, and the process that starts them all and mounts the pages and the API.
MONITOR_MODULES = {
    "core": {"settings", "api_tokens", "roles", "status_keeper"},
    "alerts": {
        "alerts",
        "targets",
        "paging",
        "events",
        "silence",
        "scheduler_down",
        "autopause",
        "watch",
        "configured",
    },
    "process": {"__init__", "__main__", "service", "mount"},
}
#: What a part never imports: other parts, or outside packages (by their root).
SURFACES = {"monitor.api", "monitor.pages", "monitor.web", "monitor.process", "cli"}
FORBIDDEN = {
    "ops": {*SURFACES, "monitor.console", "monitor.alerts", "monitor.core"}
    | {"aiohttp", "jinja2", "argparse"},
    "monitor.api": {"monitor.pages", "monitor.process"},
    "monitor.pages": {"monitor.api", "monitor.process"},
    "monitor.web": {"monitor.api", "monitor.pages", "monitor.process"},
    "monitor.console": SURFACES | {"aiohttp", "jinja2"},
    "monitor.alerts": SURFACES | {"monitor.console"},
}
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
print(" ".join(sorted(m for m in sys.modules if m.startswith("warren_cron."))))
"""


def loaded_by(module: str) -> set[str]:
    """The project's modules that importing ``module`` loads, in a fresh process."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, module],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(result.stdout.split())


def under(package: str, modules: set[str]) -> set[str]:
    """The modules of ``package`` among ``modules``."""
    return {m for m in modules if m == package or m.startswith(package + ".")}


@pytest.mark.parametrize(
    "module", ["warren_cron.monitor.__main__", "warren_cron.scheduler.__main__"]
)
def test_a_process_other_than_the_worker_loads_no_worker_module(module: str) -> None:
    """The monitor and the scheduler deploy without the worker's code."""
    assert not under("warren_cron.worker", loaded_by(module))


def test_the_monitor_loads_no_scheduler_module() -> None:
    """The monitor reads the schedules file through the contract, not the scheduler."""
    assert not under("warren_cron.scheduler", loaded_by("warren_cron.monitor.__main__"))


def test_the_command_loads_only_the_subcommand_it_runs() -> None:
    """``warren --help`` loads no process: each subcommand imports on first use."""
    loaded = loaded_by("warren_cron.cli.main")
    assert not under("warren_cron.worker", loaded) | under("warren_cron.scheduler", loaded)
    assert not under("warren_cron.monitor", loaded) | under("warren_cron.broker", loaded)


def test_every_public_name_loads_from_the_import_root() -> None:
    """Each name in ``warren_cron.__all__`` resolves, as the README's examples use them."""
    for name in warren_cron.__all__:
        assert getattr(warren_cron, name) is not None, name
    from warren_cron import Client, PermanentError, SyncClient, TaskContext, task, verify_signature

    assert callable(task) and callable(verify_signature) and TaskContext.__name__ == "TaskContext"
    assert issubclass(PermanentError, Exception)
    assert (Client.__name__, SyncClient.__name__) == ("Client", "SyncClient")


def test_a_name_outside_the_public_api_is_an_attribute_error() -> None:
    """A misspelt public name fails clearly instead of loading something by accident."""
    with pytest.raises(AttributeError, match="no attribute 'tasks'"):
        warren_cron.tasks  # noqa: B018 - the access is the test


def module_name(path: Path) -> str:
    """The dotted name under ``warren_cron`` of a file in one of the mapped folders."""
    folder = path.relative_to(ROOT).parts[0]
    parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([FOLDERS[folder], *parts])


def layer(module: str) -> str:
    """A module's part: its subpackage (the monitor's: one of its parts), or ``contract`` for
    the root's own modules."""
    parts = module.split(".")
    if parts[1:2] == ["monitor"]:
        return monitor_part(module)
    is_package = len(parts) > 2 or (ROOT / "topology" / parts[-1]).is_dir()
    return parts[1] if len(parts) > 1 and is_package else "contract"


def monitor_part(module: str) -> str:
    """The monitor's part ``module`` belongs to: a subpackage's, or its root module's."""
    first = (module.split(".")[2:] or ["__init__"])[0]
    part = MONITOR_PACKAGES.get(first) or next(
        (part for part, names in MONITOR_MODULES.items() if first in names), "unplaced"
    )
    return f"monitor.{part}"


def imported_modules(path: Path) -> set[str]:
    """Every absolute module ``path`` imports, TYPE_CHECKING imports included."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def package_imports() -> dict[str, set[str]]:
    """Which part imports which other part; the root's ``__init__``/``__main__`` (the facade
    over everything) left out."""
    edges: dict[str, set[str]] = defaultdict(set)
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            name = module_name(path)
            if name in {"warren_cron", "warren_cron.__main__"}:
                continue
            for imported in imported_modules(path):
                if imported.startswith("warren_cron.") and layer(imported) != layer(name):
                    edges[layer(name)].add(layer(imported))
    return edges


def test_the_parts_of_the_package_import_each_other_without_a_cycle() -> None:
    """Layers: the contract at the bottom, processes and commands on top, no part both above
    and below another."""
    try:
        TopologicalSorter(package_imports()).prepare()
    except CycleError as error:
        pytest.fail(f"import cycle between parts: {' -> '.join(error.args[1])}")


def imports_by_part() -> dict[str, set[str]]:
    """What each part imports: the project's parts by name, other packages by their root."""
    found: dict[str, set[str]] = defaultdict(set)
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            for imported in imported_modules(path):
                project = imported.startswith("warren_cron.")
                found[layer(module_name(path))].add(
                    layer(imported) if project else imported.split(".")[0]
                )
    return found


def test_every_module_of_the_monitor_is_in_one_of_its_parts() -> None:
    """A new module of the monitor is placed in a part, so the checks below see it."""
    monitor = [module_name(path) for path in (ROOT / "topology" / "monitor").rglob("*.py")]
    assert {monitor_part(module) for module in monitor} == {
        "monitor.api",
        "monitor.pages",
        "monitor.web",
        "monitor.console",
        "monitor.alerts",
        "monitor.core",
        "monitor.process",
    }


def test_the_monitors_parts_are_parts_of_the_package_graph() -> None:
    """The cycle check above sees the monitor's pages, API, web pieces, state and alerts
    apart, not the monitor as one node; and a cycle between two of them fails it."""
    edges = package_imports()
    assert {"monitor.api", "monitor.pages", "monitor.web", "monitor.console"} <= set(edges)
    assert "monitor" not in edges
    edges["monitor.web"] = edges["monitor.web"] | {"monitor.pages"}
    with pytest.raises(CycleError):
        TopologicalSorter(edges).prepare()


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_a_part_imports_nothing_from_above_or_beside_it(part: str) -> None:
    """The operations import no surface, web server, template or argument parser; the API's
    endpoints and the pages never import each other; the monitor's state has no web code."""
    assert not imports_by_part()[part] & FORBIDDEN[part]


def test_no_module_imports_the_root_facade_or_an_old_import_root() -> None:
    """Inside the package names come from their own modules; ``topology``, ``worker`` and
    ``scheduler`` are folders, never import names."""
    files = [
        p for f in (*FOLDERS, "scripts", "tests", "examples") for p in (ROOT / f).rglob("*.py")
    ]
    for path in files:
        roots = {m.split(".")[0] for m in imported_modules(path)}
        assert not roots & {"topology", "worker", "scheduler", "chaoslib"}, path
        if path.parts[len(ROOT.parts)] in FOLDERS:
            assert "warren_cron" not in imported_modules(path) or path.name == "__main__.py", path


def test_nothing_edits_the_import_path() -> None:
    """The installed package is found as installed: no ``sys.path`` edits anywhere but the
    worker's search for handler modules in its working directory."""
    files = [
        p for f in (*FOLDERS, "scripts", "tests", "examples") for p in (ROOT / f).rglob("*.py")
    ]
    allowed = {Path(__file__), ROOT / "worker" / "registry.py"}
    offenders = [p for p in files if "sys.path." in p.read_text() and p not in allowed]
    assert not offenders


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


def test_every_test_support_module_imports_on_the_base_install(tmp_path: Path) -> None:
    """Each module of ``warren_cron.faultkit`` imports where the test extras are hidden."""
    probe = (
        "import importlib, pkgutil, warren_cron.faultkit as support\n"
        "for module in pkgutil.iter_modules(support.__path__):\n"
        "    importlib.import_module(f'warren_cron.faultkit.{module.name}')\n"
    )
    result = on_base_install(tmp_path, ["-c", probe])
    assert result.returncode == 0, result.stderr[-3000:]


def test_chaos_workers_load_their_handler_module_on_the_base_install(tmp_path: Path) -> None:
    """A worker started with the chaos run's environment imports its ``CRON_HANDLER_MODULES``."""
    env = base_env("amqp://unused/", "unused", tmp_path / "ledger.sqlite")
    probe = (
        "import os\n"
        "from warren_cron.worker.registry import import_handler_modules\n"
        "import_handler_modules(os.environ['CRON_HANDLER_MODULES'].split(','))\n"
    )
    result = on_base_install(tmp_path, ["-c", probe], env)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.parametrize("path", sorted(SCRIPTS.rglob("*.py")), ids=lambda p: p.name)
def test_no_script_imports_the_test_suite_or_the_test_extras(path: Path) -> None:
    """Ops scripts run on the base install: nothing under scripts/ imports tests or pytest."""
    assert not {m.split(".")[0] for m in imported_modules(path)} & TEST_ONLY
