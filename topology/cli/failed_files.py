"""The files of ``warren failed``: exports written and synced to disk, and read back checked whole.

An export made before a purge may be the only copy of the records purged, so a file is never
overwritten and is on the disk before the first record is removed; a file to ``restore`` is
read and checked to the last line before anything is published.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import orjson

from warren_cron.cli.common import UsageError
from warren_cron.failed.export import exported
from warren_cron.records import FailedRecord


def check_new_file(path: str | None) -> None:
    """Refuse to overwrite a file: an earlier export may be the only copy of purged records."""
    if path and path != "-" and Path(path).exists():
        raise UsageError(f"{path} already exists; choose a new file name")


def write_jsonl(path: str, records: list[FailedRecord]) -> None:
    """Write records as JSON Lines and make sure they reached the disk."""
    lines = b"".join(orjson.dumps(exported(record)) + b"\n" for record in records)
    if path == "-":
        sys.stdout.buffer.write(lines)
        sys.stdout.flush()
        return
    with open(path, "xb") as out:
        out.write(lines)
        out.flush()
        os.fsync(out.fileno())


def read_jsonl(path: str) -> list[dict[str, Any]]:
    """Records of an export file, checked whole before anything is published."""
    records = []
    try:
        lines = Path(path).read_bytes().splitlines()
    except OSError as error:
        raise UsageError(f"cannot read {path}: {error.strerror}") from None
    for number, line in enumerate(lines, 1):
        try:
            data = orjson.loads(line) if line.strip() else None
        except orjson.JSONDecodeError as error:
            raise UsageError(f"{path}:{number}: not JSON ({error}); is it an export?") from None
        if data is not None and not (isinstance(data, dict) and "reason" in data):
            raise UsageError(f"{path}:{number}: not an exported record")
        if data is not None:
            records.append(data)
    return records
