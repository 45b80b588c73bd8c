#!/usr/bin/env python3
"""The guard against the hot path's drift: instructions per task of the worker, against the
committed baseline (``scripts/instructions_baseline.json``), fails past +3 %.

Each path (``noop``, ``http``) runs ``bench.py instructions``: our worker and its minimal
consumer under callgrind, side by side. What is compared is ours over the minimal consumer:
instruction counts are stable from run to run (about 0.5 % apart: how many frames a loop pass
reads), while both move together with Python's and aiormq's versions. Exit code 1 names the
path that grew; ``--write`` stores the figures measured as the new baseline (a change that
moves them says so in its commit).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "scripts" / "instructions_baseline.json"
TOLERANCE = 0.03
PATHS = ("noop", "http")


def measured(task: str, tasks: int) -> dict[str, float]:
    """Instructions per task of ours and of the minimal consumer, for ``task``."""
    command = [sys.executable, str(ROOT / "scripts" / "bench.py"), "--json", "instructions"]
    command += ["--tasks", str(tasks), "--task", task]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench.py instructions --task {task} failed:\n{done.stderr[-3000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    ours, raw = figures["ours_per_task"], figures["raw_per_task"]
    return {"ours": round(ours), "raw": round(raw), "ratio": round(ours / raw, 4)}


def verdict(task: str, now: dict[str, float], before: dict[str, float]) -> str | None:
    """Why ``task``'s path failed the guard, or None when it holds."""
    change = now["ratio"] / before["ratio"] - 1
    line = (
        f"{task}: {now['ours']:,.0f} instructions a task against the minimal consumer's "
        f"{now['raw']:,.0f} (ratio {now['ratio']:.4f}; baseline {before['ratio']:.4f}, "
        f"{change:+.1%})"
    )
    print(line)
    if change > TOLERANCE:
        return f"{line}: over +{TOLERANCE:.0%}; find what it costs (docs/benchmarks.md)"
    return None


def main(argv: list[str] | None = None) -> int:
    """Measure each path; exit 1 when one grew past the tolerance."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2500)
    parser.add_argument("--write", action="store_true", help="store the figures as baseline")
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    args = parser.parse_args(argv)
    figures = {task: measured(task, args.tasks) for task in args.paths}
    if args.write and set(args.paths) != set(PATHS):
        parser.error("--write measures every path: leave --paths out")
    if args.write:
        BASELINE.write_text(json.dumps(figures, indent=2) + "\n")
        print(f"baseline written: {BASELINE.relative_to(ROOT)}")
        return 0
    baseline: dict[str, Any] = json.loads(BASELINE.read_text())
    failures = [v for task in args.paths if (v := verdict(task, figures[task], baseline[task]))]
    for failure in failures:
        print(f"instructions guard: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
