"""``warren schedules create|update|archive|get``: runtime schedules, kept by the broker.

``create`` and ``update`` read a table of fields, JSON or TOML, from FILE or stdin: the
fields of one ``[[schedule]]`` (top-level, or as the one ``[[schedule]]`` of a TOML file).
A refused change exits 2 with what to fix; a version conflict says which version is current.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from aio_pika.abc import AbstractConnection

from warren_cron.cli.common import EXIT_OK, EXIT_USAGE, UsageError
from warren_cron.clock import utcnow
from warren_cron.errors import StoreError
from warren_cron.history.events import who
from warren_cron.ops import schedule_writes as writes
from warren_cron.ops.schedules import one_schedule
from warren_cron.runtime.settings import CronSettings
from warren_cron.schedules.control import read_pauses
from warren_cron.store.admin import ScheduleAdmin
from warren_cron.store.masking import shown_spec
from warren_cron.store.stored import StoredSchedule

if TYPE_CHECKING:
    from warren_cron.cli.schedules import Context

#: The largest input read: far over the largest spec, so that one is refused by its size.
MAX_INPUT_BYTES = 16 * 1024 * 1024


def read_table(source: str | None) -> dict[str, Any]:
    """The fields in FILE (or stdin for None or ``-``), JSON or TOML."""
    try:
        if source in (None, "-"):
            text = sys.stdin.read(MAX_INPUT_BYTES + 1)
        else:
            text = Path(str(source)).read_text(encoding="utf-8")[: MAX_INPUT_BYTES + 1]
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read {source} ({error})") from None
    if len(text) > MAX_INPUT_BYTES:
        raise UsageError(f"the input is over {MAX_INPUT_BYTES} bytes: give one schedule's fields")
    return _parse(text)


def _parse(text: str) -> dict[str, Any]:
    try:
        data: Any = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise UsageError(f"the input is neither JSON nor TOML ({error})") from None
    if isinstance(data, dict) and list(data) == ["schedule"] and isinstance(data["schedule"], list):
        if len(data["schedule"]) != 1:
            raise UsageError("give exactly one [[schedule]] table")
        data = data["schedule"][0]
    if not isinstance(data, dict):
        raise UsageError('give a table of fields, e.g. {"name": ..., "every": "1h", ...}')
    return data


@asynccontextmanager
async def opened(context: Context) -> AsyncIterator[ScheduleAdmin]:
    """The store, read and followed for the length of the block."""
    async with context.broker() as (connection, _):
        yield await started(context.settings, connection)


async def started(settings: CronSettings, connection: AbstractConnection) -> ScheduleAdmin:
    """A ``ScheduleAdmin`` reading the store on ``connection``."""
    admin = ScheduleAdmin(settings)
    await admin.start(connection)
    return admin


async def cmd_create(context: Context, args: argparse.Namespace) -> int:
    """Create a runtime schedule."""
    fields = read_table(args.file)
    async with opened(context) as admin:
        created = writes.create_schedule(admin, fields, who(), args.reason)
        return _done("created", await _try(created))


async def cmd_update(context: Context, args: argparse.Namespace) -> int:
    """Change fields of a runtime schedule."""
    changes = read_table(args.file)
    async with opened(context) as admin:
        change = writes.update_schedule(admin, args.name, changes, args.version, who(), args.reason)
        return _done("updated", await _try(change))


async def cmd_archive(context: Context, args: argparse.Namespace) -> int:
    """Archive a runtime schedule."""
    async with opened(context) as admin:
        change = writes.archive_schedule(admin, args.name, args.version, who(), args.reason)
        return _done("archived", await _try(change))


async def cmd_get(context: Context, args: argparse.Namespace) -> int:
    """Print a schedule: the file's with its source, or a runtime one with its history."""
    if context.schedules.get(args.name) is not None:
        return await _get_file(context, args)
    async with opened(context) as admin:
        found = await _try(admin.get(args.name))
    if found is None:
        return EXIT_USAGE
    if args.json:
        print(orjson.dumps(found.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        print(describe(found))
    return EXIT_OK


async def _get_file(context: Context, args: argparse.Namespace) -> int:
    """Print a schedule of the file as ``list`` shows it (source ``file``), with its fields."""
    async with context.broker() as (connection, _):
        pauses = await read_pauses(connection, context.names)
        admin = await started(context.settings, connection)
        found = await one_schedule(
            args.name,
            context.schedules.schedules,
            admin,
            pauses,
            context.settings,
            utcnow(),
            sync=True,
        )
    # The store's copy (once a scheduler led) adds its version, manager and history of reloads.
    copy = {} if found.stored is None else found.stored.to_json()
    shown = {**copy, **found.row, "spec": shown_spec(found.spec)}
    shown.setdefault("history", [])
    if args.json:
        print(orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode())
    else:
        print(f"{found.name}  (file {context.schedules.source}, {found.status})")
        print(_described(shown["spec"], shown["history"]))
    return EXIT_OK


async def _try(change: Any) -> StoredSchedule | None:
    try:
        result: StoredSchedule = await change
    except StoreError as error:
        print(f"warren schedules: error: {error}", file=sys.stderr)
        return None
    return result


def _done(what: str, stored: StoredSchedule | None) -> int:
    if stored is None:
        return EXIT_USAGE
    print(f"{what} {stored.name}: version {stored.version}, {stored.status}")
    return EXIT_OK


def describe(stored: StoredSchedule) -> str:
    """A runtime schedule as text: its fields, then one line per change."""
    head = f"{stored.name}  (runtime, {stored.status}, version {stored.version})"
    return head + "\n" + _described(shown_spec(stored.spec), stored.history)


def _described(spec: dict[str, Any], history: list[dict[str, Any]]) -> str:
    """Fields, one a line, then one line per change."""
    lines = [f"  {key} = {orjson.dumps(value).decode()}" for key, value in spec.items()]
    lines.append("history:")
    for item in history:
        why = f": {item['reason']}" if item.get("reason") else ""
        lines.append(f"  v{item['version']} {item['kind']} {item['at']} by {item['by']}{why}")
    return "\n".join(lines)
