"""The README stays a front page, its links lead somewhere, and the documentation site in
docs/ names the package as it installs (scripts/test.sh builds the site with --strict)."""

from __future__ import annotations

import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: The two commands a fresh machine needs, as the README's quick start gives them.
SETUP_COMMANDS = ("scripts/demo.sh", "scripts/test.sh")
#: ``[text](target)`` and ``![alt](target)``; a target ends at a space (before a title) or ``)``.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
#: How the package was imported and run before the folders became one import root.
OLD_NAMES = re.compile(
    r"\bfrom (worker|scheduler|topology)\b[.\w]* import"
    r"|^\s*import (worker|scheduler|topology)\b"
    r"|python -m (worker|scheduler|topology)\b"
    r"|\btopology\.\w"
    r"|scripts/(failed|enqueue|queues|history|status|schedules)\.py"
    r"|chaoslib"
    r"|worker/monitor",
    re.M,
)


def pages() -> list[Path]:
    """Every page of the documentation site, and the README."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def prose(text: str) -> str:
    """Markdown without its fenced code blocks, where links are not links."""
    return FENCE.sub("", text)


def slug(heading: str) -> str:
    """The anchor MkDocs gives a heading (Python-Markdown's default ``toc`` slugify)."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower())


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings."""
    return {slug(h) for h in HEADING.findall(prose(page.read_text()))}


def relative_links(page: Path) -> list[tuple[str, str]]:
    """Each link of a page that points inside the repository: (path, anchor)."""
    found = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        found.append((path, anchor))
    return found


def nav_pages(nav: list[Any]) -> set[str]:
    """The page files a MkDocs ``nav`` lists, at any depth."""
    found: set[str] = set()
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            found |= nav_pages(value) if isinstance(value, list) else {value}
    return found


def test_the_readme_is_a_front_page_of_under_300_lines() -> None:
    """The README says what warren is and where to read on; the rest lives in docs/."""
    lines = README.read_text().splitlines()
    assert len(lines) < 300, f"README.md has {len(lines)} lines; move detail to docs/"


def test_the_readme_gives_exactly_the_two_setup_commands_of_a_fresh_machine() -> None:
    """Its quick start runs scripts/demo.sh and scripts/test.sh, and both exist and run."""
    quick_start = README.read_text().partition("## Quick start")[2].partition("\n## ")[0]
    block = re.search(r"```sh\n(.*?)```", quick_start, re.S)
    assert block is not None, "the quick start has no sh block"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert commands == list(SETUP_COMMANDS)
    for command in SETUP_COMMANDS:
        assert (ROOT / command).stat().st_mode & 0o111, f"{command} is not executable"


def test_every_relative_link_of_the_readme_points_to_a_file_that_exists() -> None:
    """A link into docs/ or the repository leads to a file, and an anchor to its heading."""
    links = relative_links(README)
    assert any(path.startswith("docs/") for path, _ in links), "the README links no docs page"
    for path, anchor in links:
        target = (README.parent / path) if path else README
        assert target.is_file(), f"README.md links {path!r}, which does not exist"
        if anchor:
            assert anchor in anchors(target), f"README.md links {path}#{anchor}: no such heading"


def test_the_readme_says_why_folders_and_import_names_differ() -> None:
    """A reader of the source finds topology/, worker/ and scheduler/ explained as warren_cron."""
    text = README.read_text()
    for name in ("topology/", "worker/", "scheduler/", "warren_cron", "package-dir"):
        assert name in text, f"README.md does not mention {name}"


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_names_the_old_import_roots_or_script_paths(page: Path) -> None:
    """Pages import from warren_cron and run ``warren COMMAND``, as the install provides."""
    found = [m.group(0) for m in OLD_NAMES.finditer(page.read_text())]
    assert not found, f"{page.name} still says {found}; use warren_cron / warren COMMAND"


def test_every_docs_page_is_in_the_site_nav_and_every_nav_entry_exists() -> None:
    """No page is left out of the site's navigation, and the navigation names real pages."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed = nav_pages(config["nav"])
    present = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert listed == present


def test_the_settings_writer_finds_its_table_on_the_settings_page() -> None:
    """``scripts/settings_doc.py --check`` reads the page in the site and finds it current."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "settings_doc.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "settings.md" in nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
