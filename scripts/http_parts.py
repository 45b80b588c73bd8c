#!/usr/bin/env python3
"""Instructions per call of each part of an http task's attempt, as the worker runs it.

Run: ``.venv/bin/python scripts/http_parts.py [--json] [--runs 3] [--calls N]``

Each part (``PARTS``) calls the product's own code as the worker does, with the payload
``{"url": "http://127.0.0.1:8080/hook", "json": {"customer": 42}}``, the worker's default
settings and logging (stdout to /dev/null), in a running event loop. Counted by callgrind, as
``bench.py instructions`` counts (this machine's VM has no hardware counter for ``perf``): a
start-up under it costs 2 G instructions, so one child per run makes every part's loops (N=0,
then N calls), each between ``os.getppid()`` markers that make callgrind dump
(``--dump-before=getppid``). The empty loop's cost (``floor``) is subtracted; each figure is
the median of ``--runs`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import aiohttp
from aiormq.abc import AbstractChannel, DeliveredMessage
from pamqp import frame
from pamqp.commands import Basic
from pamqp.header import ContentHeader
from yarl import URL

import warren_cron.worker.http as wh
from warren_cron.clock import now_text
from warren_cron.codec import decode_body, task_message
from warren_cron.envelope import Envelope
from warren_cron.history.events import join
from warren_cron.history.publisher import CHUNK, HistoryPublisher
from warren_cron.names import Names
from warren_cron.redaction import Scrubber
from warren_cron.runtime.logs import configure_logging
from warren_cron.signing import sign
from warren_cron.webhook import HttpRequest, SecretRef, parse_request
from warren_cron.worker.acks import Acks
from warren_cron.worker.attempt import Outcome, Result, returned_result
from warren_cron.worker.context import TaskContext
from warren_cron.worker.delivery import Delivery
from warren_cron.worker.destinations import DestinationPolicy
from warren_cron.worker.fate import decide
from warren_cron.worker.flow import Flow, task_destination
from warren_cron.worker.metrics import WorkerMetrics
from warren_cron.worker.report import Ended, Reporter, _ids
from warren_cron.worker.settings import WorkerSettings

ROOT = Path(__file__).resolve().parent.parent
HOST, URL_TEXT, PLAN_KEY = "127.0.0.1", "http://127.0.0.1:8080/hook", "30s-1m-2m"
PAYLOAD: dict[str, Any] = {"url": URL_TEXT, "json": {"customer": 42}}
ENV_NAME, ENV_VALUE = "HOOK_TOKEN", "Bearer tok_live_5f2a9c81d3e64b7a"
NAMED = {**PAYLOAD, "headers": {"Authorization": {"env": ENV_NAME}}}
SIGNING_KEY = "whsec_3b1f0e7d9a5c2468"
FAILED_BODY = b'{"error":"upstream unavailable","retry":true}'
ECHO_BODY = b'{"error":"upstream unavailable","echo":"Bearer tok_live_5f2a9c81d3e64b7a"}'
Step = Callable[[], object]
Steps = dict[str, Step]
#: Each part and what it calls; ``floor`` is subtracted from the others (``NET``: another).
PARTS = {
    "floor": "the empty loop, per iteration",
    "validate": "parse_request: the payload's HttpRequest",
    "policy-known": "DestinationPolicy.check_host, a known host",
    "policy-new": "check_host, a host seen first (net of next)",
    "policy-object": "a fresh DestinationPolicy alone",
    "secret-none": "HttpHandler._value, a plain header value",
    "secret-env": "HttpHandler._value, { env } (resolve)",
    "signing": "sign: HMAC-SHA256 X-Cron-Signature",
    "cron-headers": "cron_headers: X-Cron-*",
    "headers": "HttpHandler.headers, default settings",
    "headers-signed": "HttpHandler.headers, signing secret set",
    "headers-secret": "HttpHandler.headers, Authorization { env }",
    "scrub-ok": "Scrubber + check_status, 200",
    "scrub-fail": "Scrubber + check_status, 503 + body",
    "scrub-fail-secret": "the same, a secret sent and echoed",
    "flow-admit": "Flow.admit: breaker admits, budget counts",
    "flow-ended": "Flow.ended: breaker counts a success",
    "flow-judged": "Flow.judged, a success",
    "flow-retry": "Flow.judged, a retry the budget grants",
    "history-event": "Reporter._attempt_event",
    "history-emit": "HistoryPublisher.emit (orjson) + join",
    "log-line": "Reporter.ended without history: log line",
    "report": "Reporter.ended: log line + history",
}
NET = {"policy-new": "policy-object"}


@dataclass
class World:
    """What the parts draw on, built once per child as a worker builds it."""

    settings: WorkerSettings
    envelope: Envelope
    ctx: TaskContext
    session: aiohttp.ClientSession
    handler: wh.HttpHandler
    result: Result
    end: Ended


def delivery(envelope: Envelope) -> Delivery:
    """The task message of ``envelope`` as a worker holds it (as ``tests/wire.py`` makes it)."""
    message = task_message(envelope)
    encoded = frame.marshal(ContentHeader(0, len(message.body), message.properties), 1)
    header = frame.unmarshal(encoded)[2]
    assert isinstance(header, ContentHeader)
    deliver = Basic.Deliver(consumer_tag="parts", delivery_tag=1, routing_key=PLAN_KEY)
    held = DeliveredMessage(deliver, header, message.body, cast(AbstractChannel, None))
    return Delivery(held, Acks(cast(AbstractChannel, None)))


async def world() -> World:
    """The worker's settings, one attempt's message, envelope, context, handler and end."""
    os.environ[ENV_NAME] = ENV_VALUE
    settings = WorkerSettings(http_secret_env=[ENV_NAME])
    first = datetime(2026, 1, 1, tzinfo=UTC)
    sent = Envelope(task="http", payload=PAYLOAD, run_id="nightly@1", scheduled_for=first)
    message = delivery(sent.model_copy(update={"schedule": "nightly"}))
    envelope = decode_body(message.body)
    ctx = TaskContext.of(envelope, 1, False, settings.timeout_for(envelope.timeout_seconds))
    options = wh.http_options(settings)
    session = wh.new_session(options.policy)
    result = returned_result({"status": 200}, settings.result_max_bytes)
    verdict, status = decide(result, PLAN_KEY), result.http_status
    end = Ended(message, envelope, 1, verdict, 0.0123, now_text(), False, status, result.value)
    handler = wh.HttpHandler(session, options)
    return World(settings, envelope, ctx, session, handler, result, end)


def prepared(payload: Any) -> tuple[HttpRequest, URL, bytes | None]:
    """The request, URL and body ``HttpHandler.__call__`` makes of a payload."""
    request = parse_request(payload, decoded=True)
    return request, URL(request.url, encoded=False), wh.encode_body(request)


def policy_steps(w: World) -> Steps:
    """The floor, validation, and the destination policy: a host it passed before, one seen
    first (by a fresh policy), and the making of a fresh policy alone."""
    payload, policy = w.envelope.payload, w.handler._options.policy
    allow, deny = policy.allow, policy.deny
    return {
        "floor": lambda: None,
        "validate": lambda: parse_request(payload, decoded=True),
        "policy-known": lambda: policy.check_host(HOST),
        "policy-new": lambda: DestinationPolicy(allow, deny).check_host(HOST),
        "policy-object": lambda: DestinationPolicy(allow, deny),
    }


def header_steps(w: World) -> Steps:
    """Secrets (``HttpHandler._value``), signing, X-Cron-* and ``HttpHandler.headers``."""
    o, ctx, handler, ref = w.handler._options, w.ctx, w.handler, SecretRef(env=ENV_NAME)
    signer = wh.HttpHandler(w.session, wh.HttpOptions(o.policy, o.secrets, SIGNING_KEY, o.misses))
    (request, url, body), named = prepared(PAYLOAD), prepared(NAMED)
    target, data = url.raw_path_qs, body or b""
    return {
        "secret-none": lambda: handler._value("nightly", "header 'X-Job'"),
        "secret-env": lambda: handler._value(ref, "header 'Authorization'"),
        "signing": lambda: sign(SIGNING_KEY, request.method, target, data),
        "cron-headers": lambda: wh.cron_headers(ctx),
        "headers": lambda: handler.headers(request, ctx, url, body),
        "headers-signed": lambda: signer.headers(request, ctx, url, body),
        "headers-secret": lambda: handler.headers(named[0], ctx, named[1], named[2]),
    }


def scrub_steps(w: World) -> Steps:
    """A fresh ``Scrubber`` of the request's secrets and ``check_status``, as
    ``HttpHandler.__call__`` does: on a 200, a 503 with a body, a 503 echoing a secret."""

    def scrubbed(payload: Any, status: int, body: bytes) -> Step:
        request, url, sent = prepared(payload)
        headers = w.handler.headers(request, w.ctx, url, sent)
        answer = wh.Answer(status, body, None, "utf-8")

        def step() -> None:
            scrub = Scrubber(wh.request_secrets(request, headers, url))
            with contextlib.suppress(wh.HttpStatusError):
                wh.check_status(request.method, url, answer, scrub)

        return step

    return {
        "scrub-ok": scrubbed(PAYLOAD, 200, b""),
        "scrub-fail": scrubbed(PAYLOAD, 503, FAILED_BODY),
        "scrub-fail-secret": scrubbed(NAMED, 503, ECHO_BODY),
    }


def flow_steps(w: World) -> Steps:
    """``Flow.admit``, ``Flow.ended`` and ``Flow.judged`` as the worker calls them, each on
    a flow of its own (breaker and budget on, metrics as the settings say)."""
    metrics = WorkerMetrics(w.settings.metrics_port != 0)
    admit, ended, judged, retried = (Flow(w.settings, metrics) for _ in range(4))
    error = f"HttpStatusError: HTTP 503 from POST {URL_TEXT}"
    retry = decide(Result(Outcome.RETRYABLE, "exception", error, 503), PLAN_KEY)
    target = task_destination(w.envelope, w.settings.flow_scope)
    assert retried.budget is not None and target is not None
    retried.budget.heard(target, 10**9, 0, time.monotonic())  # the budget grants retries
    envelope, result, verdict = w.envelope, w.result, w.end.verdict
    return {
        "flow-admit": lambda: admit.admit(envelope, 1),
        "flow-ended": lambda: ended.ended(envelope, result),
        "flow-judged": lambda: judged.judged(envelope, verdict),
        "flow-retry": lambda: retried.judged(envelope, retry),
    }


def drained(history: HistoryPublisher | None) -> None:
    """Take a full batch and join it, as the publisher's sender does every ``CHUNK`` events."""
    if history is not None and len(history._buffer) >= CHUNK:
        join([history._buffer.popleft() for _ in range(CHUNK)])


def report_steps(w: World) -> Steps:
    """The history event, its encoding (``emit``), the log line (``Reporter.ended`` without
    history), and ``Reporter.ended`` whole; the publisher is never started."""
    end, names, settings = w.end, Names(w.settings.namespace), w.settings
    history, full = (HistoryPublisher(names, settings, "worker", metrics=False) for _ in "ab")
    ids, outcome, ms = _ids(end), end.verdict.action.value, round(end.seconds * 1000, 2)
    event = Reporter(WorkerMetrics(False), None)._attempt_event
    data = event(end, ids, outcome, ms)

    def reporting(events: HistoryPublisher | None) -> Step:
        reporter = Reporter(WorkerMetrics(settings.metrics_port != 0), events)

        def step() -> None:
            reporter.ended(end)
            drained(events)

        return step

    def emit() -> None:
        history.emit(data)
        drained(history)

    return {
        "history-event": lambda: event(end, ids, outcome, ms),
        "history-emit": emit,
        "log-line": reporting(None),
        "report": reporting(full),
    }


async def child(parts: list[str], counts: list[int]) -> None:
    """Per part: build and warm it, then call it ``counts`` times, between getppid markers."""
    configure_logging("INFO", "json")
    w = await world()
    groups = (policy_steps, header_steps, scrub_steps, flow_steps, report_steps)
    steps = {name: step for group in groups for name, step in group(w).items()}
    try:
        for name in parts:
            step = steps[name]
            step()
            gc.collect()
            for n in counts:
                os.getppid()
                for _ in range(n):
                    step()
            os.getppid()
    finally:
        await w.session.close()


def child_command(parts: list[str], counts: list[int]) -> list[str]:
    """The command of a child making ``parts`` ``counts`` times."""
    script, numbers = str(Path(__file__).resolve()), ",".join(map(str, counts))
    return [sys.executable, script, "_run", ",".join(parts), numbers]


def ran(command: list[str]) -> None:
    """Run ``command`` in the project, its stdout to /dev/null; exit if it fails."""
    out, err = subprocess.DEVNULL, subprocess.PIPE
    done = subprocess.run(command, cwd=ROOT, stdout=out, stderr=err, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr.decode()[-3000:]}")


def callgrind_run(parts: list[str], calls: int) -> dict[str, float]:
    """One run under callgrind: one child makes every part's loops, each dumped alone."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "cg.out"
        tool = ["valgrind", "--tool=callgrind", "--dump-before=getppid"]
        ran([*tool, f"--callgrind-out-file={out}", *child_command(parts, [0, calls])])
        dumps = sorted(Path(tmp).glob("cg.out.*"), key=lambda p: int(p.suffix[1:]))
        if len(dumps) != 3 * len(parts):
            raise SystemExit(f"{len(dumps)} dumps for {3 * len(parts)} markers: a stray getppid?")
        lines = [dump.read_text().splitlines() for dump in dumps]
        totals = [int(next(t for t in ls if t.startswith("summary:")).split()[1]) for ls in lines]
    # Each part's dumps: its setup, its loop of 0 calls, its loop of ``calls``.
    return {name: (totals[3 * i + 2] - totals[3 * i + 1]) / calls for i, name in enumerate(parts)}


def net(parts: list[str], runs: list[dict[str, float]]) -> dict[str, dict[str, Any]]:
    """Each part's instructions per call in each run, net of its base, and their median."""
    figures: dict[str, dict[str, Any]] = {}
    for name in parts:
        base = NET.get(name, "floor")
        values = [r[name] - (r[base] if name != "floor" else 0.0) for r in runs]
        figures[name] = {
            "label": PARTS[name],
            "per_call": round(statistics.median(values), 1) + 0.0,
        }
        figures[name]["runs"] = [round(value, 1) for value in values]
    return figures


def show(figures: dict[str, dict[str, Any]], title: str) -> None:
    """The table: part, instructions per call (median), the runs' spread, what it calls."""
    print(f"{title}\n{'part':<18} {'instr/call':>11} {'spread':>8}  what")
    for name, figure in figures.items():
        spread = max(figure["runs"]) - min(figure["runs"])
        print(f"{name:<18} {figure['per_call']:>11,.0f} {spread:>8,.0f}  {figure['label']}")


def main(argv: list[str] | None = None) -> int:
    """Measure the parts (or, as ``_run PARTS COUNTS``, be the child that makes them)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_run"]:
        asyncio.run(child(argv[1].split(","), [int(n) for n in argv[2].split(",")]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=1_000, help="N, the calls of each loop")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), metavar="PART")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("http_parts needs valgrind on PATH (apt install valgrind)")
    parts = ["floor", *(p for p in args.parts if p != "floor")]
    parts += [NET[p] for p in parts if p in NET and NET[p] not in parts]
    started = time.monotonic()
    figures = net(parts, [callgrind_run(parts, args.calls) for _ in range(args.runs)])
    meta = {"event": "Ir (callgrind)", "calls": args.calls, "runs": args.runs}
    meta["seconds"] = round(time.monotonic() - started)
    if args.json:
        print(json.dumps({**meta, "parts": figures}, indent=2))
    else:
        title = "user-space instructions per call of each part (callgrind, {calls:,} calls, "
        show(figures, title.format(**meta) + "median of {runs} runs, {seconds} s)".format(**meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
