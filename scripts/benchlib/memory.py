"""``bench.py memory``: what the leading scheduler holds for each schedule, in process.

A realistic mix (``mixed``): per-customer crons in a dozen time zones, some intervals, http
tasks with their own URLs, a few with a retry block or jitter. Each count is measured in a
process of its own (``_memory`` below), which builds what a leader holds and nothing else:
the store's state folded from one create each (as the log gives them), the leader's
schedules built from it (``RuntimeSchedules``), the file's and the runtime ones combined and
the heap of next fires; for ``--source file`` the same schedules read from a schedules file,
with the store's copy of each that the leader's apply writes. The figure is the growth of
the process's RSS over that build, divided by the count. ``--baseline DIR`` runs the same
children against another tree of the package (a copy of an older revision laid out as the
install lays it out: ``DIR/warren_cron``), side by side.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import os
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from benchlib.common import Bench, print_table

ZONES = (
    "UTC",
    "Europe/Berlin",
    "Europe/London",
    "America/New_York",
    "America/Chicago",
    "America/Los_Angeles",
    "America/Sao_Paulo",
    "Asia/Tokyo",
    "Asia/Kolkata",
    "Asia/Singapore",
    "Australia/Sydney",
    "Africa/Johannesburg",
)
EVERY = ("5m", "15m", "1h", "6h")


def mixed(index: int) -> dict[str, Any]:
    """One customer's schedule: nine in ten a cron in its zone, one in ten an interval; most
    call the customer's own URL, one in five a Python task; a few retry or jitter."""
    spec: dict[str, Any] = {"name": f"customer-{index:07d}-{('report', 'sync', 'bill')[index % 3]}"}
    if index % 10 == 9:
        spec["every"] = EVERY[index % len(EVERY)]
    else:
        day = "*" if index % 7 else str(index % 7 + 1)
        spec["cron"] = f"{index % 60} {index % 24} * * {day}"
        spec["timezone"] = ZONES[index % len(ZONES)]
    if index % 5 == 4:
        spec |= {"task": "sync_account", "payload": {"account": index}}
    else:
        url = f"https://hooks.customer-{index}.example.com/warren/{index:07d}/nightly"
        spec |= {"task": "http", "payload": {"url": url}, "timeout_seconds": 120.0}
    if index % 50 == 0:
        spec["retry"] = {"max_retries": 5, "delay_ms": 30_000}
    if index % 20 == 0:
        spec["jitter"] = "30s"
    return spec


def rss_kb() -> int:
    """This process's resident set, in KB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def held(count: int, source: str) -> dict[str, float]:
    """Build what a leader holds for ``count`` schedules from ``source``; bytes a schedule."""
    from warren_cron.names import Names
    from warren_cron.scheduler.firing import FireHeap
    from warren_cron.scheduler.runtime import RuntimeSchedules
    from warren_cron.scheduler.settings import SchedulerSettings
    from warren_cron.schedules.load import ScheduleSet, parse_schedules
    from warren_cron.store.changes import Change

    settings = SchedulerSettings()
    specs = [mixed(index) for index in range(count)]
    text = toml(specs) if source == "file" else ""
    changes = [orjson.dumps(change_json(spec, source)) for spec in specs]
    now = datetime.now().astimezone()
    gc.collect()
    before = rss_kb()
    gc.disable()
    runtime = RuntimeSchedules(settings, Names("bench"), asyncio.Event())
    for body in changes:
        runtime.book.state.apply(Change.from_json(orjson.loads(body)))  # type: ignore[arg-type]
    for name in list(runtime.book.state.active()):
        runtime._build(name)
    file = parse_schedules(text, settings, "bench.toml") if text else ScheduleSet("none", ())
    compact = getattr(file, "compact", None)
    file = compact() if compact is not None else file
    combined = runtime._combine(file)
    heap = FireHeap(combined, now - timedelta(seconds=1))
    gc.enable()
    gc.collect()
    grown = (rss_kb() - before) * 1024
    # What is left once the allocator hands back the pages the build's garbage freed.
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    kept = (rss_kb() - before) * 1024
    assert len(heap.schedules.schedules) == count and specs and changes
    return {"bytes_per_schedule": grown / count, "trimmed_per_schedule": kept / count}


def change_json(spec: dict[str, Any], source: str) -> dict[str, Any]:
    """The log's create of ``spec`` (the file's apply marks its copies as the file's)."""
    from warren_cron.store.apply import SCHEDULER_FILE
    from warren_cron.store.changes import Change

    manager = SCHEDULER_FILE if source == "file" else None
    return Change("create", spec["name"], 0, "bench", None, spec, manager).to_json()


def toml(specs: list[dict[str, Any]]) -> str:
    """The schedules as a schedules file."""
    from benchlib.runtime_schedules import toml_entry

    lines = []
    for spec in specs:
        flat = {k: v for k, v in spec.items() if k != "retry"}
        entry = toml_entry(flat)
        if "retry" in spec:
            inner = ", ".join(f"{k} = {v}" for k, v in spec["retry"].items())
            entry += f"retry = {{ {inner} }}\n"
        lines.append(entry)
    return "\n".join(lines)


def child(count: int, source: str, tree: str | None) -> dict[str, float]:
    """Run ``held`` in a fresh process (against ``tree`` when given)."""
    paths = (
        [str(Path(__file__).parent.parent)]
        if tree is None
        else [tree, str(Path(__file__).parent.parent)]
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    command = [sys.executable, __file__, str(count), source]
    done = subprocess.run(command, env=env, capture_output=True, check=True)
    result: dict[str, float] = orjson.loads(done.stdout.splitlines()[-1])
    return result


def memory(args: Any, _bench: Bench, _workdir: Path) -> dict[str, Any]:
    """Bytes a schedule on the leader, file and runtime, compact (and a baseline tree)."""
    trees: list[tuple[str, str | None]] = [("compact", None)]
    if args.baseline:
        trees.insert(0, ("baseline", str(args.baseline)))
    results: dict[str, Any] = {}
    for count in args.counts:
        rows: list[tuple[str, list[float]]] = []
        for source in args.sources:
            for label, tree in trees:
                runs = [child(count, source, tree) for _ in range(args.rounds)]
                results[f"{label}_{source}_{count}"] = runs
                for key in ("bytes_per_schedule", "trimmed_per_schedule"):
                    rows.append((f"{label} {source} {key}", [r[key] for r in runs]))
        print_table(f"memory of the leader: {count:,} schedules", rows)
    print(f"load average at the end: {os.getloadavg()}")
    return results


def add_command(sub: Any) -> None:
    """The ``memory`` subcommand and its options."""
    command = sub.add_parser("memory", help=memory.__doc__)
    command.add_argument(
        "--counts", type=lambda text: [int(n) for n in text.split(",")], default=[100_000]
    )
    command.add_argument(
        "--sources", type=lambda text: text.split(","), default=["runtime", "file"]
    )
    command.add_argument("--baseline", type=Path, default=None, help="an older package tree")


if __name__ == "__main__":
    print(orjson.dumps(held(int(sys.argv[1]), sys.argv[2])).decode())
