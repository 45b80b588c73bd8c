"""``warren namespace delete NAME``: list, then delete, every queue, stream and exchange warren
declared in a namespace (``topology/ops/namespace.py`` does it; this only parses and prints).

Exit codes: 0 deleted, listed (``--dry-run``) or nothing found; 1 refused because warren
processes are connected (``--force`` deletes anyway), or some objects could not be deleted;
2 usage or bad settings; 3 the broker or the management API unreachable.
"""

from __future__ import annotations

import argparse
import sys

import orjson
from pydantic import ValidationError

from warren_cron.broker.management import Management, ManagementError
from warren_cron.cli.common import (
    EXIT_BROKER,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_USAGE,
    aligned,
    log_to_stderr,
    run_command,
)
from warren_cron.cli.namespace_args import PROG, parse_args
from warren_cron.errors import PlanError, SettingsError
from warren_cron.ops.namespace import Found, Kind, NamespaceInUse, Teardown, delete, survey
from warren_cron.plan import RetryPlan
from warren_cron.runtime.settings import CronSettings, load_settings


def namespace_settings(name: str) -> CronSettings:
    """CRON_* settings with ``name`` as the namespace; ``SettingsError`` for a bad one."""
    load_settings(CronSettings)  # the environment's own problems, named as everywhere
    try:
        return CronSettings(namespace=name)
    except ValidationError as error:
        problem = error.errors()[0]["msg"]
        raise SettingsError(f"namespace {name!r}: {problem}") from None


def table(objects: list[Found]) -> str:
    """The objects as an aligned table."""
    rows = [("KIND", "NAME", "MESSAGES", "CONSUMERS")]
    for found in objects:
        consumers = "held" if found.held else str(found.consumers)
        messages = "-" if found.kind == "exchange" else str(found.messages)
        rows.append((found.kind, found.name, messages, consumers))
    return aligned(rows)


def summary(found: Teardown) -> str:
    """``3 queues, 5 streams and 33 exchanges``."""
    kinds: tuple[Kind, ...] = ("queue", "stream", "exchange")
    parts = [f"{found.count(kind)} {kind}{'s' if found.count(kind) != 1 else ''}" for kind in kinds]
    return f"{parts[0]}, {parts[1]} and {parts[2]}"


def said(found: Teardown, args: argparse.Namespace) -> int:
    """Print what was found and done; the exit code."""
    if args.json:
        print(orjson.dumps(found.to_json(), option=orjson.OPT_INDENT_2).decode())
    elif found.objects:
        print(table(found.objects))
    if found.unseen:
        print(f"{PROG}: {found.unseen}", file=sys.stderr)
    if not found.objects:
        print(f"{PROG}: nothing of namespace {found.namespace!r} found", file=sys.stderr)
        return EXIT_OK
    if args.dry_run:
        return dry_run(found)
    return deleted(found)


def dry_run(found: Teardown) -> int:
    """What ``--dry-run`` says under the list."""
    print(f"{PROG}: would delete {summary(found)} of {found.namespace!r}", file=sys.stderr)
    for line in found.connected:
        print(f"{PROG}: connected: {line} (refused without --force)", file=sys.stderr)
    return EXIT_OK


def deleted(found: Teardown) -> int:
    """What a deletion says under the list."""
    done, total = len(found.deleted), len(found.objects)
    print(f"{PROG}: deleted {done} of {total}: {summary(found)}", file=sys.stderr)
    for name, why in found.failed.items():
        print(f"{PROG}: not deleted: {name}: {why}", file=sys.stderr)
    if found.connected:
        print(
            f"{PROG}: forced while connected ({'; '.join(found.connected)}): processes still "
            "running declare their queues again; stop them",
            file=sys.stderr,
        )
    return EXIT_PARTIAL if found.failed else EXIT_OK


def refused(error: NamespaceInUse, args: argparse.Namespace) -> int:
    """Why nothing was deleted (with ``--json``, what was found, ``connected`` filled)."""
    if args.json:
        print(orjson.dumps(error.found.to_json(), option=orjson.OPT_INDENT_2).decode())
    print(
        f"{PROG}: refused, warren processes are {error}. Stop them, or give --force "
        f"({len(error.found.objects)} objects, nothing deleted)",
        file=sys.stderr,
    )
    return EXIT_PARTIAL


async def act(settings: CronSettings, args: argparse.Namespace) -> int:
    """Survey or delete, then say it."""
    options = {"management_url": args.management_url, "plans": args.plan}
    try:
        if args.dry_run:
            return said(await survey(settings, **options), args)
        return said(await delete(settings, force=args.force, **options), args)
    except NamespaceInUse as error:
        return refused(error, args)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        settings = namespace_settings(args.name)
        for key in args.plan:
            RetryPlan.from_key(key)
    except (SettingsError, PlanError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        if args.management_url:
            Management(args.management_url, "/", ("", ""))  # only to check the URL's form
    except ValueError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    log_to_stderr("WARNING")
    try:
        return run_command(PROG, act(settings, args))
    except ManagementError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return EXIT_BROKER
