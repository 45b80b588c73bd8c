"""The worked example of docs/testing.md runs, as a user's project would run it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "testing.md"


def blocks() -> dict[str, str]:
    """The page's Python blocks, by the file named on their first line."""
    found = re.findall(r"```python\n# (\S+)\n(.*?)```", PAGE.read_text(), re.DOTALL)
    return dict(found)


def test_the_testing_page_example_passes_with_the_installed_plugin(tmp_path: Path) -> None:
    """The job module and its tests from the page, in a project of their own: pytest finds
    the kit's fixtures through the installed entry point, and every test passes."""
    files = blocks()
    assert set(files) == {"myapp/jobs.py", "test_jobs.py"}
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_mode=auto",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "5 passed" in result.stdout
