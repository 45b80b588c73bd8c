#!/usr/bin/env python3
"""Rewrite the settings table and ``.env.example`` from the Settings classes.

``python scripts/settings_doc.py`` rewrites both; ``--check`` exits 1 when either is stale,
so the documentation cannot drift from the code.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from warren_cron.runtime.settings_doc import env_example, with_table

ROOT = Path(__file__).resolve().parent.parent
#: The documentation page holding the generated table between its markers.
TABLE_PAGE = ROOT / "docs" / "settings.md"


def main() -> int:
    """Rewrite, or with --check compare, the settings page's table and .env.example."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if either file is stale")
    args = parser.parse_args()
    page_path, env_path = TABLE_PAGE, ROOT / ".env.example"
    page, env = with_table(page_path.read_text()), env_example()
    stale = [p.name for p, text in ((page_path, page), (env_path, env)) if p.read_text() != text]
    if args.check:
        if stale:
            print(f"stale: {', '.join(stale)}; run python scripts/settings_doc.py", file=sys.stderr)
        return 1 if stale else 0
    page_path.write_text(page)
    env_path.write_text(env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
