"""How ``warren failed`` shows records to people: a table, and one record in full."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import orjson

from warren_cron.cli.common import aligned
from warren_cron.failed.export import exported
from warren_cron.headers import H_X_DEATH, jsonable, text
from warren_cron.records import FailedRecord
from warren_cron.redaction import redact_body

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


def table(records: Sequence[FailedRecord]) -> str:
    """Records as an aligned text table with a header line."""
    return aligned([COLUMNS, *(row(record) for record in records)])


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
