"""A real, non-editable install: one import root, the ``warren`` command, and nothing else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pip install --target`` of this checkout, as a wheel would install it."""
    target = tmp_path_factory.mktemp("install")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return target


def run_installed(target: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run ``args`` from the install's parent folder with only the installed copy on the
    import path, and the CRON_* variables ``extra`` alone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRON_")}
    env.update(PYTHONPATH=str(target), **extra)
    return subprocess.run(
        args, cwd=target.parent, env=env, capture_output=True, text=True, timeout=60
    )


def test_the_install_adds_exactly_one_import_name(installed: Path) -> None:
    """Beside its metadata and its command the install holds one package, ``warren_cron``."""
    names = {p.name for p in installed.iterdir() if not p.name.endswith(".dist-info")}
    assert names == {"warren_cron", "bin"}
    assert (installed / "warren_cron" / "py.typed").exists()
    assert list((installed / "warren_cron" / "monitor" / "web" / "templates").glob("*.html"))


def test_the_folder_names_are_not_import_names(installed: Path) -> None:
    """``import worker`` fails where only the installed package is: no generic roots leak."""
    for name in ("worker", "scheduler", "topology"):
        result = run_installed(installed, sys.executable, "-c", f"import {name}")
        assert result.returncode == 1 and "ModuleNotFoundError" in result.stderr, name


def test_the_installed_command_lists_and_runs_its_subcommands(installed: Path) -> None:
    """``warren --help`` and ``warren failed list --help`` work from the installed copy."""
    warren = str(installed / "bin" / "warren")
    top = run_installed(installed, sys.executable, warren, "--help")
    assert top.returncode == 0 and "failed" in top.stdout and "scheduler" in top.stdout
    failed = run_installed(installed, sys.executable, warren, "failed", "list", "--help")
    assert failed.returncode == 0 and "usage: warren failed list" in failed.stdout


def test_the_installed_worker_imports_handler_modules_from_its_working_directory(
    installed: Path,
) -> None:
    """``warren worker`` started in an application's folder finds its handler modules there,
    as ``python -m`` would, and says which one it cannot import."""
    (installed.parent / "myjobs.py").write_text(
        "from warren_cron import task\n\n@task('hello')\nasync def hello(payload, ctx):\n    pass\n"
    )
    warren = str(installed / "bin" / "warren")
    found = run_installed(installed, warren, "worker", "--check", CRON_HANDLER_MODULES="myjobs")
    assert found.returncode == 0, found.stderr
    missing = run_installed(installed, warren, "worker", "--check", CRON_HANDLER_MODULES="nojobs")
    assert missing.returncode == 2 and "'nojobs'" in missing.stderr


def test_the_installed_worker_checks_its_configuration(installed: Path) -> None:
    """``warren worker --check`` validates the settings and exits 0 without a broker."""
    result = run_installed(
        installed, sys.executable, str(installed / "bin" / "warren"), "worker", "--check"
    )
    assert result.returncode == 0, result.stderr
    assert "configuration OK" in result.stdout
