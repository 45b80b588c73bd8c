"""``bench.py schedules``: N runtime schedules against the same N from a schedules file.

Each round runs both contenders, alternately, each in a namespace of its own: a leading
scheduler and ``--schedulers`` - 1 standbys, or with ``--partitions`` that many schedulers
splitting the schedules (all started before the creates; the change lag is then every
scheduler's, as each follows every change, and the ready time is until the others lead
every partition of the one killed). ``--count`` quiet schedules (a customer's nightly report: an
``http`` task with its URL, a cron in a time zone) and ``--firing`` noop schedules
``every = "1s"`` whose fires give the fire lag. The runtime contender starts from an empty
schedules file and gets every schedule through ``Client.create_schedules``; the file
contender reads them from a TOML file. Then, for both: the leader's RSS and CPU over
``--idle`` seconds with the standby up, the fire lag of that window (the ``late_ms`` of
``fire published``), and the new leader's ready time: ``kill -9`` of the leader to the
standby's first fire published (every ``--firing`` schedule is due each second, and the
fires missed meanwhile are caught up from the watermark as soon as it is ready).

The runtime contender also gives the create rate and the change lag: a change's time
(written by the client) to the leader's ``runtime schedule changed`` line (its ``lag_ms``),
over the bulk create and over ``--changes`` single updates made one after another after it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from benchlib.common import Bench, LineCounter, cpu_seconds, log_time, print_table, reap, rss_mb
from benchlib.lag import percentile
from benchlib.scheduling import (
    LEADING,
    PLAN,
    PUBLISHED,
    events,
    leading_partitions,
    spread_over,
    start,
)
from warren_cron.client import Client
from warren_cron.faultkit.waits import until

CHANGED = b'"event":"runtime schedule changed"'
STANDING_BY = b'"event":"standing by: another scheduler leads"'
SPLIT = b'"event":"leading partitions"'
#: Creates handed to one ``create_schedules`` call.
CHUNK = 5000
#: After the standby is up and before the idle window: the leader settles.
SETTLE_SECONDS = 5.0
#: The schedulers' lock retry unless ``--leader-retry`` says otherwise: a standby takes over
#: within it after a ``kill -9``. With partitions every scheduler probes each lock it does not
#: hold once a retry (64 at 0.2 s: 320 probes a second each), a load on the broker the
#: product's default (3 s) does not make.
LEADER_RETRY = 0.2
Popen = subprocess.Popen[bytes]


def quiet(index: int) -> dict[str, Any]:
    """A customer's nightly report, as an application would create it."""
    return {
        "name": f"customer-{index:06d}-nightly-report",
        "cron": f"{index % 60} {index % 24} * * *",
        "timezone": "Europe/Berlin",
        "task": "http",
        "payload": {"url": f"https://reports.example.com/customers/{index}/nightly"},
        "timeout_seconds": 120.0,
    }


def firing(index: int) -> dict[str, Any]:
    """A schedule that fires every second: its fires measure the fire lag."""
    return {"name": f"tick-{index:03d}", "every": "1s", "task": "noop"}


def specs(args: Any) -> list[dict[str, Any]]:
    """Every schedule of one contender."""
    return [quiet(i) for i in range(args.count)] + [firing(i) for i in range(args.firing)]


def toml_entry(spec: dict[str, Any]) -> str:
    """One ``[[schedule]]`` table of ``spec`` (strings, numbers and one-level tables)."""
    lines = ["[[schedule]]"]
    for key, value in spec.items():
        if isinstance(value, dict):
            inner = ", ".join(f'{k} = "{v}"' for k, v in value.items())
            lines.append(f"{key} = {{ {inner} }}")
        else:
            lines.append(f'{key} = "{value}"' if isinstance(value, str) else f"{key} = {value}")
    return "\n".join(lines) + "\n"


def start_scheduler(bench: Bench, path: Path, log: Path, mark: bytes | None) -> Popen:
    """A scheduler on ``path``; returns once its log has ``mark`` (leading, standing by),
    at once without one."""
    env = {
        "CRON_LEADER_RETRY_SECONDS": str(bench.leader_retry),
        "CRON_SCHEDULER_PARTITIONS": str(bench.partitions),
    }
    process = start(
        ["-m", "warren_cron.scheduler"], bench, log, CRON_SCHEDULES_FILE=str(path), **env
    )
    if mark is not None:
        until(lambda: LineCounter(log, mark)() > 0 or process.poll() is not None, 600)
    if process.poll() is not None:
        raise RuntimeError(f"the scheduler exited {process.returncode}; see {log}")
    return process


async def create_all(bench: Bench, args: Any) -> float:
    """Create every schedule through the client; creates a second."""
    settings = bench.settings.model_copy(update={"namespace": bench.names.namespace})
    async with Client(settings) as client:
        await client.list_schedules()  # connected and following: not part of the rate
        everything = specs(args)
        began = time.perf_counter()
        for first in range(0, len(everything), CHUNK):
            made = await client.create_schedules(everything[first : first + CHUNK], by="bench")
            assert all(not isinstance(item, Exception) for item in made), made[:3]
        rate = len(everything) / (time.perf_counter() - began)
        for index in range(args.changes):
            name = quiet(index)["name"]
            await client.update_schedule(name, {"cron": f"{index % 60} 3 * * *"}, version=1)
    return rate


def change_lags(log: Path, kind: str) -> list[float]:
    """``lag_ms`` of the leader's change lines of ``kind``."""
    return [float(e["lag_ms"]) for e in events(log, CHANGED) if e.get("change") == kind]


def idle(args: Any, leaders: list[Popen], logs: list[Path]) -> dict[str, float]:
    """The leaders' CPU share (summed) and RSS (the largest) over ``--idle`` s, and the
    fire lag of that window."""
    time.sleep(SETTLE_SECONDS)
    began, cpu = time.time(), sum(cpu_seconds(p.pid) for p in leaders)
    time.sleep(args.idle)
    ended, used = time.time(), sum(cpu_seconds(p.pid) for p in leaders) - cpu
    late = [
        float(e["late_ms"])
        for log in logs
        for e in events(log, PUBLISHED)
        if began <= log_time(e) <= ended and str(e.get("schedule", "")).startswith("tick-")
    ]
    return {
        "cpu_pct": 100 * used / (ended - began),
        "rss_mb": max(rss_mb(p.pid) for p in leaders),
        "fire_p50_ms": percentile(late, 0.5),
        "fire_p99_ms": percentile(late, 0.99),
    }


def take_over(bench: Bench, leader: Popen, others: list[Path]) -> float:
    """``kill -9`` the first leader; seconds until the others are ready for what it led:
    the standby's first fire published, or every partition led by the others."""
    killed = time.time()
    leader.send_signal(signal.SIGKILL)
    leader.wait()
    if bench.partitions > 1:
        whole = set(range(bench.partitions))
        until(lambda: set().union(*(leading_partitions(log) for log in others)) == whole, 600)
        return max(log_time(events(log, SPLIT)[-1]) for log in others) - killed
    until(lambda: LineCounter(others[0], PUBLISHED)() > 0, 600)
    return log_time(events(others[0], PUBLISHED)[0]) - killed


def contender(args: Any, workdir: Path, runtime: bool) -> dict[str, float]:
    """One round of one contender, in a namespace of its own."""
    bench = Bench(args.url)
    bench.plan_keys.update(step.key for step in PLAN.suffixes())  # the scheduler declares it
    bench.partitions = args.partitions
    bench.leader_retry = args.leader_retry
    stamp = f"{'rt' if runtime else 'file'}-{bench.names.namespace}"
    path = workdir / f"{stamp}.toml"
    logs = [workdir / f"{stamp}-{n}.log" for n in range(args.schedulers)]
    text = "" if runtime else "\n".join(toml_entry(spec) for spec in specs(args))
    path.write_text(text, encoding="utf-8")
    processes: list[Popen] = []
    figures: dict[str, float] = {}
    split = args.partitions > 1
    try:
        processes.append(start_scheduler(bench, path, logs[0], LEADING))
        if split:  # every scheduler leads its share before the creates
            processes += [start_scheduler(bench, path, log, None) for log in logs[1:]]
            until(lambda: spread_over(logs, args.partitions), 600)
        leaders = logs if split else logs[:1]
        if runtime:
            figures["create_per_s"] = asyncio.run(create_all(bench, args))
        # The file is written into the store on a first lead, by the first scheduler, which
        # logs every change it folds (the others read what came before they started from
        # the snapshot): at rest once it has them all, as the runtime one once created.
        total = args.count + args.firing + (args.changes if runtime else 0)
        folding = leaders if runtime else leaders[:1]
        until(lambda: all(LineCounter(log, CHANGED)() >= total for log in folding), 900)
        if runtime:
            figures.update(lag_figures(leaders))
        if not split:
            processes += [start_scheduler(bench, path, log, STANDING_BY) for log in logs[1:]]
        figures.update(idle(args, processes[: len(leaders)], leaders))
        figures["ready_s"] = take_over(bench, processes[0], logs[1:])
        return figures
    finally:
        for process in processes:
            if process.poll() is None:
                reap(process)
        asyncio.run(bench.delete())


def lag_figures(logs: list[Path]) -> dict[str, float]:
    """Change lag percentiles at every leader: over the bulk create, and over the single
    updates (each leader follows every change, whichever partition it falls in)."""
    bulk = [lag for log in logs for lag in change_lags(log, "create")]
    single = [lag for log in logs for lag in change_lags(log, "update")]
    return {
        "bulk_p50_ms": percentile(bulk, 0.5),
        "bulk_p99_ms": percentile(bulk, 0.99),
        "change_p50_ms": percentile(single, 0.5) if single else float("nan"),
        "change_p99_ms": percentile(single, 0.99) if single else float("nan"),
    }


def schedules(args: Any, _bench: Bench, workdir: Path) -> dict[str, Any]:
    """Runtime schedules against the same schedules from a file, rounds alternated."""
    rounds = []
    for index in range(args.rounds):
        order = (True, False) if index % 2 == 0 else (False, True)
        kept = [runtime for runtime in order if args.only in (None, KINDS[runtime])]
        done = {runtime: contender(args, workdir, runtime) for runtime in kept}
        rounds.append((done.get(True, {}), done.get(False, {})))
        print(
            f"round {index + 1}: runtime {done.get(True)}\n         file {done.get(False)}",
            flush=True,
        )
    report(args, rounds)
    return {"runtime": [r for r, _ in rounds], "file": [f for _, f in rounds]}


def report(args: Any, rounds: list[tuple[dict[str, float], dict[str, float]]]) -> None:
    """The tables: the runtime contender's own figures, then both side by side."""
    title = f"{args.count:,} schedules + {args.firing} every 1s, {args.schedulers} schedulers"
    if args.partitions > 1:
        title += f", {args.partitions} partitions"
    if args.only != "file":
        print_table(
            f"runtime store: {title}",
            [(key, [r[key] for r, _ in rounds]) for key in RUNTIME_ONLY],
        )
    rows: list[tuple[str, list[float]]] = []
    for key in SIDE_BY_SIDE:
        mine = [
            (f"{kind} {key}", [pair[n][key] for pair in rounds])
            for n, kind in enumerate(KINDS.values())
            if args.only in (None, kind)
        ]
        rows += mine
        if args.only is None:
            rows.append(
                (f"ratio runtime/file {key}", [r[key] / f[key] if f[key] else 0 for r, f in rounds])
            )
    heading = f"{args.only} contender" if args.only else "runtime against file"
    print_table(f"{heading}: {title}", rows)
    print(f"load average at the end: {os.getloadavg()}")


RUNTIME_ONLY = (
    "create_per_s",
    "bulk_p50_ms",
    "bulk_p99_ms",
    "change_p50_ms",
    "change_p99_ms",
)
#: The contenders by the name ``--only`` takes, keyed as ``contender``'s ``runtime`` flag.
KINDS = {True: "runtime", False: "file"}
SIDE_BY_SIDE = ("ready_s", "rss_mb", "cpu_pct", "fire_p50_ms", "fire_p99_ms")


def add_command(sub: Any) -> None:
    """The ``schedules`` subcommand and its options."""
    command = sub.add_parser("schedules", help=schedules.__doc__)
    command.add_argument("--count", type=int, default=100_000, help="quiet schedules")
    command.add_argument("--firing", type=int, default=20, help="schedules every 1s")
    command.add_argument("--changes", type=int, default=200, help="single updates after")
    command.add_argument("--idle", type=float, default=20.0, help="seconds of the idle window")
    command.add_argument("--schedulers", type=int, default=2, help="schedulers running")
    command.add_argument(
        "--partitions", type=int, default=1, help="CRON_SCHEDULER_PARTITIONS (1: a standby)"
    )
    command.add_argument(
        "--leader-retry",
        type=float,
        default=LEADER_RETRY,
        help="CRON_LEADER_RETRY_SECONDS of the schedulers",
    )
    command.add_argument(
        "--only",
        choices=tuple(KINDS.values()),
        help="one contender (a million from a file takes over ten minutes to apply)",
    )
