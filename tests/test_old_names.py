"""No page, help text or doc tells a user to run a script that is now a ``warren`` subcommand.

The ops tools were scripts (``history.py show``, ``failed.py replay``, ``status.py``...); the
command a user runs now is ``warren <subcommand>``. The dashboard's templates and every help
text (each parser a subcommand builds, its own subcommands' too) may not name a script at
all; the docs and the README may name those files only as modules, never as a command.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from warren_cron.cli.main import SUBCOMMANDS, run, usage

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "topology" / "monitor" / "web" / "templates"
#: The old scripts' names, one per ops subcommand.
OLD = r"(?:history|status|failed|schedules|queues|enqueue|runs|namespace|doctor)\.py"
#: Any mention of an old script (templates and help texts have no business naming a module).
ANY_MENTION = re.compile(rf"\b{OLD}\b")
#: An old script run as a command: by its path, with a subcommand or option, or "as x.py".
AS_COMMAND = re.compile(
    rf"scripts/{OLD}|\b{OLD}[`\s]+(?:show|list|replay|purge|export|restore|pause|resume"
    rf"|trigger|wait|cancel|--?\w)|\bas [`<code>]*{OLD}"
)


@pytest.fixture(autouse=True)
def kept_logging() -> Iterator[None]:
    """A command run in this process (``warren status`` sends its logs to stderr) leaves the
    log configuration of the tests that run after it in this process as it was."""
    config = structlog.get_config()
    yield
    structlog.configure(**config)


def help_texts(name: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The help of every parser ``warren NAME --help`` builds (its subcommands' included)."""
    built: list[argparse.ArgumentParser] = []
    init = argparse.ArgumentParser.__init__

    def recording(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        built.append(self)

    monkeypatch.setattr(argparse.ArgumentParser, "__init__", recording)
    with pytest.raises(SystemExit):
        run(name, ["--help"])
    return [parser.format_help() for parser in built]


def test_the_dashboard_templates_name_no_old_script() -> None:
    """Every template tells of ``warren <subcommand>``, never ``history.py`` and the like."""
    found = [
        f"{path.name}: {match.group(0)}"
        for path in sorted(TEMPLATES.glob("*.html"))
        for match in ANY_MENTION.finditer(path.read_text())
    ]
    assert found == []


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_no_help_text_names_an_old_script(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``warren NAME --help`` and the help of each of its own subcommands name no script."""
    texts = help_texts(name, monkeypatch)
    assert texts, f"warren {name} --help built no parser"
    found = [m.group(0) for text in [*texts, usage()] for m in ANY_MENTION.finditer(text)]
    assert found == []


def test_no_doc_runs_an_old_script() -> None:
    """The docs and the README run ``warren <subcommand>``, not ``failed.py replay``."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = [
        f"{page.relative_to(ROOT)}: {match.group(0)}"
        for page in pages
        for match in AS_COMMAND.finditer(page.read_text())
    ]
    assert found == []
