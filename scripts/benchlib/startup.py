"""``startup``: how long the ``warren`` command takes from process start to exit.

Each contender is a fresh process, run ``--runs`` times, the contenders interleaved so that
a neighbour's burst hits them alike: ``warren --help``, ``warren enqueue --help``, ``warren
enqueue noop`` (connect, declare, publish confirmed, close: the run id printed) and ``warren
runs show`` of that run, against the ``--help`` of other task queues' commands (rq, arq,
celery) installed in a throwaway virtual environment of their own (``--reference-venv``,
made with pip on first use, never the project's). Each contender's modules are counted once
with ``python -X importtime``. The run that ``runs show`` reads has its attempt in the
history stream, as a worker writes it: an empty stream costs a read 2 s of waiting for a last
chunk that never comes (``PROBE_SECONDS``), which no deployment pays.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aio_pika

from benchlib.common import DEFAULTS, ROOT, Bench, cron_env, print_table
from warren_cron.faultkit.processes import WARREN
from warren_cron.history.events import encode, event
from warren_cron.history.stream import declare_history

#: Targets on the reference machine when quiet, in seconds.
TARGETS = {"warren --help": 0.25, "warren enqueue": 0.5, "warren worker": 0.4}
#: What a worker logs once it consumes.
CONSUMING = b'"worker started"'
#: The other commands whose ``--help`` is the reference: Python task queues of the same kind.
REFERENCES = ("rq", "arq", "celery")
#: Outside the project, so nothing of theirs can reach its environment.
REFERENCE_VENV = Path("/tmp/warren-bench-reference")  # noqa: S108 - a throwaway, rebuilt at will


def reference_commands(venv: Path) -> dict[str, list[str]]:
    """``rq --help`` and the others from ``venv``, which is made first if it lacks one."""
    if not all((venv / "bin" / name).exists() for name in REFERENCES):
        print(f"installing {', '.join(REFERENCES)} into {venv} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        pip = [str(venv / "bin" / "pip"), "install", "--quiet", *REFERENCES]
        subprocess.run(pip, check=True)
    return {f"{name} --help": [str(venv / "bin" / name), "--help"] for name in REFERENCES}


def warren_commands(run_id: str) -> dict[str, list[str]]:
    """The ``warren`` command lines timed, the enqueue sending a ``noop`` to the namespace."""
    return {
        "warren --help": [WARREN, "--help"],
        "warren enqueue --help": [WARREN, "enqueue", "--help"],
        "warren enqueue": [WARREN, "enqueue", "noop"],
        "warren runs show": [WARREN, "runs", "show", run_id],
        "warren worker": [WARREN, "worker"],
    }


def ran(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``command`` to its end; exit 1 is an answer (``runs show`` of a run with no event
    yet), anything above a failure of the benchmark."""
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    if done.returncode > 1:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr}")
    return done


def wall(command: list[str], env: dict[str, str]) -> float:
    """Seconds from starting ``command`` to its exit, or for ``warren worker`` to the line
    that says it consumes (then it is stopped)."""
    started = time.perf_counter()
    if command[1:] != ["worker"]:
        ran(command, env)
        return time.perf_counter() - started
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE) as worker:
        assert worker.stdout is not None
        for line in worker.stdout:
            if CONSUMING in line:
                took = time.perf_counter() - started
                worker.terminate()
                worker.wait(30)
                return took
    raise RuntimeError(f"warren worker exited {worker.returncode} before it consumed")


def modules_loaded(command: list[str], env: dict[str, str]) -> int:
    """How many modules ``command`` (a Python script) imports, by ``-X importtime``."""
    python = str(Path(command[0]).with_name("python"))
    done = ran([python, "-X", "importtime", *command], env)
    return done.stderr.count("import time:") - 1  # less the header line


def first_run(env: dict[str, str]) -> str:
    """Enqueue once (declaring the namespace) and give the run id ``runs show`` reads."""
    return ran([WARREN, "enqueue", "noop"], env).stdout.strip()


async def record_attempt(bench: Bench, run_id: str) -> None:
    """Write the run's successful attempt into the history stream, as a worker does."""
    attempt = event(
        "attempt", run_id=run_id, task="noop", attempt=1, outcome="succeeded", duration_ms=1.0
    )
    connection = await aio_pika.connect(bench.url)
    async with connection:
        await declare_history(connection, bench.names, DEFAULTS)
        channel = await connection.channel(publisher_confirms=True)
        message = aio_pika.Message(
            encode([attempt]), delivery_mode=aio_pika.DeliveryMode.PERSISTENT
        )
        await channel.default_exchange.publish(message, bench.names.history_stream)


def rounds(
    commands: dict[str, list[str]], env: dict[str, str], runs: int
) -> dict[str, list[float]]:
    """Wall seconds of each command over ``runs`` rounds, the order rotated every round."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    names = list(commands)
    for round_ in range(runs):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(wall(commands[name], env))
    return times


def startup(args: Any, bench: Bench, workdir: Any) -> dict[str, Any]:
    """Start-up to exit of ``warren --help``, ``enqueue`` and ``runs show``, and of ``warren
    worker`` to consuming, against rq's, arq's and celery's ``--help``."""
    bench.plan_keys.update(step.key for step in DEFAULTS.default_plan().suffixes())
    env = cron_env(bench)
    run_id = first_run(env)
    asyncio.run(record_attempt(bench, run_id))
    commands = {**warren_commands(run_id), **reference_commands(args.reference_venv)}
    modules = {  # a worker runs until stopped: its imports are in the drain's profile
        name: modules_loaded(command, env)
        for name, command in commands.items()
        if name != "warren worker"
    }
    times = rounds(commands, env, args.runs)
    print_table(
        f"start-up to exit, seconds, {args.runs} runs each",
        [(name, values) for name, values in times.items()],
    )
    print("\nmodules imported")
    for name, count in modules.items():
        print(f"  {name:28} {count}")
    ours = times["warren --help"]
    refs = [name for name in commands if not name.startswith("warren")]
    ratios = {ref: [o / r for o, r in zip(ours, times[ref], strict=True)] for ref in refs}
    print_table("warren --help / reference --help", list(ratios.items()))
    for name, target in TARGETS.items():
        print(f"  target {name} <= {target} s: {statistics.median(times[name]):.3f} s")
    result = {key(name): statistics.median(values) for name, values in times.items()}
    return result | {f"ratio_{key(ref)}": statistics.median(ratios[ref]) for ref in refs}


def key(name: str) -> str:
    """A command line's JSON key: ``warren enqueue --help`` is ``warren_enqueue_help``."""
    return name.replace(" --", "_").replace(" ", "_")


def add_command(sub: Any) -> None:
    """The ``startup`` subcommand and its options."""
    command = sub.add_parser("startup", help=startup.__doc__)
    command.add_argument("--runs", type=int, default=15, help="runs of each command")
    command.add_argument("--reference-venv", type=Path, default=REFERENCE_VENV)
