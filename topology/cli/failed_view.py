"""How ``warren failed`` shows records to people: a table, and one record in full."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from textwrap import indent
from typing import Any, TextIO

import orjson

from warren_cron.cli.common import aligned_row, widths
from warren_cron.failed.export import exported
from warren_cron.headers import H_X_DEATH, jsonable, text
from warren_cron.records import FailedRecord
from warren_cron.redaction import redact_body

#: Rows read before the first is written, to set the column widths; a longer cell later pushes
#: its own line's columns right.
SAMPLE_ROWS = 100
COLUMNS = ("RUN ID", "SCHEDULE", "TASK", "ATTEMPTS", "REASON", "FAILED AT", "REPLAYS")


def when(value: datetime | None) -> str:
    """A UTC time as people read it, to the second."""
    return value.strftime("%Y-%m-%d %H:%M:%SZ") if value else "-"


def row(record: FailedRecord) -> tuple[str, ...]:
    """The cells of one record in the ``list`` table."""
    return (
        record.run_id or "-",
        record.schedule or "-",
        record.task or "-",
        str(record.attempts),
        record.reason,
        when(record.failed_at),
        str(record.replays),
    )


async def write_table(records: AsyncIterator[FailedRecord], out: TextIO) -> int:
    """Records as an aligned table with a header line, each written as soon as it is read
    (the first ``SAMPLE_ROWS`` set the widths); the number of records."""
    sample: list[tuple[str, ...]] = []
    async for record in records:
        sample.append(row(record))
        if len(sample) >= SAMPLE_ROWS:
            break
    sizes = widths([COLUMNS, *sample])
    for cells in [COLUMNS, *sample]:
        _write(out, aligned_row(cells, sizes) + "\n")
    count = len(sample)
    async for record in records:
        _write(out, aligned_row(row(record), sizes) + "\n")
        count += 1
    return count


async def write_json(records: AsyncIterator[FailedRecord], out: TextIO) -> int:
    """Records' summaries as one indented JSON array, each written as soon as it is read."""
    count = 0
    async for record in records:
        element = orjson.dumps(record.summary(), option=orjson.OPT_INDENT_2).decode()
        _write(out, ("[\n" if count == 0 else ",\n") + indent(element, "  "))
        count += 1
    _write(out, "\n]\n" if count else "[]\n")
    return count


def _write(out: TextIO, text: str) -> None:
    # Flushed at once: a reader sees each row as it is read, and a closed pipe stops the read.
    out.write(text)
    out.flush()


def pretty_json(value: Any) -> str:
    """Indented JSON of any header or body value."""
    return orjson.dumps(jsonable(value), option=orjson.OPT_INDENT_2).decode()


def payload(body: bytes) -> str:
    """The body: indented JSON when it is JSON, else its text, else a note on its size."""
    try:
        return pretty_json(orjson.loads(body))
    except orjson.JSONDecodeError:
        pass
    try:
        return body.decode()
    except UnicodeDecodeError:
        return f"<{len(body)} bytes, not UTF-8; use --json to get them as base64>"


def history(entries: Sequence[Mapping[str, Any]]) -> list[str]:
    """The broker's dead-letter history, newest first, one line per queue and reason."""
    lines = []
    for entry in entries:
        keys = ",".join(text(k) for k in entry.get("routing-keys") or [])
        lines.append(
            f"  {text(entry.get('queue', '-'))}  {text(entry.get('reason', '-'))}"
            f"  x{entry.get('count', '?')}  first {text(entry.get('time', '-'))}  keys {keys}"
        )
    return lines or ["  (none)"]


def full(record: FailedRecord) -> str:
    """One record with everything an on-call engineer asks about, its secrets hidden."""
    fields = [
        ("run id", record.run_id or "-"),
        ("schedule", record.schedule or "-"),
        ("task", record.task or "-"),
        ("reason", record.reason),
        ("error", record.error or "-"),
        ("attempts", str(record.attempts)),
        ("failed at", when(record.failed_at)),
        ("replays", str(record.replays)),
        ("routing key", record.routing_key or "-"),
    ]
    lines = [f"{name:<12}: {value}" for name, value in fields]
    lines += [
        "properties  : " + pretty_json(dict(record.properties)),
        "payload:",
        payload(redact_body(record.body)),
    ]
    headers = {k: v for k, v in record.headers.items() if k not in (H_X_DEATH, "x-death")}
    lines += ["headers:", pretty_json(headers), "x-death history (newest first):"]
    return "\n".join(lines + history(record.history))


def shown_record(record: FailedRecord) -> dict[str, Any]:
    """The record as ``show --json`` prints it: the export's form, its secrets hidden."""
    return exported(replace(record, body=redact_body(record.body)))
