"""``instructions``: CPU instructions per task of our worker and of the minimal consumer.

Wall time and CPU time on a shared virtual machine move by a fifth from one round to the
next; instruction counts do not. Each contender drains a small and a large batch under
valgrind's callgrind, and the difference between the two counts, divided by the difference
in tasks, is what one more task costs, start-up and shutdown left out. Counts are of user
space only: system calls (socket writes, log writes) are not in them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from benchlib.common import (
    FLOW_ENV,
    ROOT,
    SEARCH_PATH,
    Bench,
    LineCounter,
    print_table,
    reached,
    worker_env,
)
from benchlib.http import PLAN, endpoint, payload
from warren_cron.faultkit.waits import until

CALLGRIND = ["valgrind", "--tool=callgrind"]


def total_instructions(out: Path) -> int:
    """The instruction total of a callgrind output file."""
    for line in out.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {out}")


def ours(bench: Bench, tasks: int, workdir: Path, extra: dict[str, str] | None = None) -> int:
    """``warren worker`` under callgrind until ``tasks`` attempts, then SIGTERM."""
    out, log = workdir / f"cg-ours-{tasks}.out", workdir / f"cg-ours-{tasks}.log"
    worker = [sys.executable, "-m", "warren_cron.worker"]
    command = [*CALLGRIND, f"--callgrind-out-file={out}", *worker]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            stdout=sink,
            stderr=subprocess.DEVNULL,
            env=worker_env(bench, 100, extra=extra),
        )
        until(reached(LineCounter(log), tasks), 1800)
        process.send_signal(signal.SIGTERM)
        process.wait()
    return total_instructions(out)


#: The minimal consumer of each task: ``drain``'s for noop, ``http``'s (aiohttp) for http.
BASELINES = {"noop": [str(ROOT / "scripts" / "bench.py"), "_raw"], "http": ["-m", "benchlib.http"]}


def raw(bench: Bench, tasks: int, workdir: Path, task: str = "noop") -> int:
    """The minimal consumer of ``task`` under callgrind."""
    out = workdir / f"cg-raw-{tasks}.out"
    loop = [*BASELINES[task], bench.url, bench.names.main_queue, "100", str(tasks)]
    command = [*CALLGRIND, f"--callgrind-out-file={out}", sys.executable, *loop]
    subprocess.run(
        command,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": SEARCH_PATH},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return total_instructions(out)


def instructions(args: argparse.Namespace, bench: Bench, workdir: Path) -> dict[str, Any]:
    """Marginal instructions per task, ours against the minimal consumer."""
    if shutil.which("valgrind") is None:
        raise SystemExit("instructions needs valgrind on PATH (apt install valgrind)")
    small, large = args.tasks // 5, args.tasks
    counts: dict[str, list[int]] = {"ours": [], "raw": []}
    with endpoint() if args.task == "http" else nullcontext("") as url:
        for name in ("ours", "raw"):
            for tasks in (small, large):
                asyncio.run(bench.fill(tasks, args.task, PLAN, payload(url) if url else None))
                counts[name].append(
                    ours(bench, tasks, workdir, FLOW_ENV if args.flow else None)
                    if name == "ours"
                    else raw(bench, tasks, workdir, args.task)
                )
    per_task = {name: (c[1] - c[0]) / (large - small) for name, c in counts.items()}
    print_table(
        f"instructions per task, {small:,} and {large:,} {args.task} tasks under callgrind",
        [
            ("ours", [per_task["ours"]]),
            (f"minimal consumer ({args.task})", [per_task["raw"]]),
            ("ratio raw/ours", [per_task["raw"] / per_task["ours"]]),
        ],
    )
    return {"ours_per_task": per_task["ours"], "raw_per_task": per_task["raw"]}


def add_command(sub: Any) -> None:
    """The ``instructions`` subcommand and its options."""
    command = sub.add_parser("instructions", help=instructions.__doc__)
    command.add_argument("--tasks", type=int, default=2500)
    command.add_argument(
        "--task",
        choices=sorted(BASELINES),
        default="noop",
        help="noop (against drain's consumer) or http (against aio-pika + aiohttp, local endpoint)",
    )
    command.add_argument(
        "--flow", action="store_true", help="ours with the circuit breaker and retry budget on"
    )
