"""What the ``warren`` command loads: help answers without the heavy libraries, so it is instant."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from warren_cron.cli.main import SUBCOMMANDS

ROOT = Path(__file__).resolve().parent.parent
#: Libraries that take tenths of a second to import; no help text needs any of them.
HEAVY = ("pydantic", "pydantic_settings", "aio_pika", "aiohttp", "structlog", "jinja2", "certifi")
#: Runs the command's entry point as the console script does, in a fresh interpreter, then
#: names every heavy library it left loaded on a last line of stderr.
PROBE = f"""
import sys
from warren_cron.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exiting:
    code = exiting.code
heavy = sorted(m for m in sys.modules if m.split(".")[0] in {HEAVY!r})
sys.stderr.write("\\nloaded: " + " ".join(heavy) + "\\n")
sys.exit(code)
"""


def heavy_loaded(*argv: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``warren ARGV`` in a fresh process: its result and the heavy modules it loaded."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    last = result.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith("loaded:"), result.stderr
    return result, last.removeprefix("loaded:").split()


#: Every subcommand's help, and its subcommands' where it has them.
HELPS = [
    ["--help"],
    *([name, "--help"] for name in sorted(SUBCOMMANDS)),
    ["enqueue", "-h"],
    ["runs", "show", "--help"],
    ["runs", "cancel", "--help"],
    ["failed", "replay", "--help"],
    ["namespace", "delete", "--help"],
    ["history", "--outcome", "failed", "--help"],
    ["schedules", "create", "--help"],
    ["schedules", "backfill", "--help"],
]


@pytest.mark.parametrize("argv", HELPS, ids=" ".join)
def test_help_loads_no_heavy_library(argv: list[str]) -> None:
    """``warren --help`` and a subcommand's ``--help`` print their usage with none of pydantic,
    the settings, aio-pika, aiohttp, structlog, jinja2 or certifi loaded."""
    result, loaded = heavy_loaded(*argv)
    assert result.returncode == 0, result.stderr
    assert "usage: warren" in result.stdout
    assert loaded == []


def test_a_usage_error_is_told_without_the_heavy_libraries() -> None:
    """A subcommand's bad option is refused as before (exit 2, argparse's message) while
    asking for help, without loading what only running the command needs."""
    result, loaded = heavy_loaded("enqueue", "noop", "--delay", "soon", "--help")
    assert result.returncode == 2
    assert "'soon' is no duration like 90s, 5m or 1h30m" in result.stderr
    assert loaded == []


def test_the_version_loads_no_heavy_library() -> None:
    """``warren --version`` reads the installed distribution's version, and nothing heavy."""
    result, loaded = heavy_loaded("--version")
    assert result.returncode == 0 and result.stdout.startswith("warren ")
    assert loaded == []
