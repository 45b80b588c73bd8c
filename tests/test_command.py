"""The ``warren`` command: every subcommand, its help and version, and the kept scripts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from warren_cron.cli.main import SUBCOMMANDS, package_version
from warren_cron.faultkit.processes import WARREN

ROOT = Path(__file__).resolve().parent.parent
#: The ops scripts kept under scripts/ as callers' paths, each the same as its subcommand.
KEPT_SCRIPTS = ("enqueue", "failed", "queues", "history", "status", "schedules")


def warren(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the installed ``warren`` console script."""
    return subprocess.run(
        [WARREN, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def test_help_lists_every_subcommand_with_its_line() -> None:
    """``warren --help`` names each subcommand and what it does, and exits 0."""
    result = warren("--help")
    assert result.returncode == 0
    for name, sub in SUBCOMMANDS.items():
        assert f"  {name}" in result.stdout and sub.summary in result.stdout


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_every_subcommand_explains_itself_under_its_own_name(name: str) -> None:
    """``warren NAME --help`` prints a usage line that names ``warren NAME``, exit 0."""
    result = warren(name, "--help")
    assert result.returncode == 0, result.stderr
    assert f"usage: warren {name}" in result.stdout


@pytest.mark.parametrize("args", [["--version"], ["failed", "--version"], ["worker", "--version"]])
def test_version_is_the_installed_distribution_version(args: list[str]) -> None:
    """``--version``, alone or after a subcommand, prints the installed version."""
    result = warren(*args)
    assert result.returncode == 0
    assert result.stdout.strip() == f"warren {package_version()}" != "warren unknown"


def test_an_unknown_subcommand_exits_2_naming_the_choices() -> None:
    """A typo is a usage error that lists the subcommands, not a traceback."""
    result = warren("replay")
    assert result.returncode == 2
    assert "no command 'replay'" in result.stderr and "failed" in result.stderr


def test_no_subcommand_prints_the_usage_on_stderr_and_exits_2() -> None:
    """``warren`` alone is a usage error, with the list of commands."""
    result = warren()
    assert result.returncode == 2 and "commands:" in result.stderr and not result.stdout


@pytest.mark.parametrize("name", KEPT_SCRIPTS)
def test_a_kept_script_is_the_subcommand(name: str) -> None:
    """``python scripts/NAME.py --help`` gives what ``warren NAME --help`` gives."""
    script = subprocess.run(
        [sys.executable, f"scripts/{name}.py", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert script.returncode == 0 and script.stdout == warren(name, "--help").stdout


def test_the_package_runs_as_a_module_too() -> None:
    """``python -m warren_cron`` is the same command as ``warren``."""
    result = subprocess.run(
        [sys.executable, "-m", "warren_cron", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0 and result.stdout == warren("--help").stdout
