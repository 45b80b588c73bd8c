"""Known tasks: each worker announces the tasks it registers, with their payloads' JSON
schemas, and the monitor keeps who announced what.

A worker publishes its announcement every ``ANNOUNCE_SECONDS`` on the fanout
``<ns>_known_tasks`` (auto-deleted with the last listener's queue, as the fleet's counts),
and one saying it leaves when it stops; a listener hears them in an exclusive queue of its
own. A worker not heard for ``LIVE_SECONDS`` is gone. ``POST /api/v1/runs`` refuses a task
no live worker registered (``topology/monitor/api/runs.py``); until one worker announced
anything (workers of an older release announce nothing), nothing is refused.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import orjson

from warren_cron.envelope import check_task

#: Seconds between two announcements of a worker.
ANNOUNCE_SECONDS = 5.0
#: A worker not heard for this long is gone.
LIVE_SECONDS = 3 * ANNOUNCE_SECONDS
#: A schema larger than this, as JSON, is left out of an announcement (the task stays known).
MAX_SCHEMA_BYTES = 16_384


def announcement(worker: str, tasks: dict[str, Any], *, leaving: bool = False) -> bytes:
    """A worker's announcement: its id, its tasks with their payload schemas (or None)."""
    kept = {
        name: schema if len(orjson.dumps(schema)) <= MAX_SCHEMA_BYTES else None
        for name, schema in tasks.items()
    }
    return orjson.dumps({"worker": worker, "tasks": kept, "leaving": leaving})


@dataclass(frozen=True, slots=True)
class Heard:
    """What one worker announced last, and when (monotonic seconds)."""

    tasks: dict[str, Any]
    at: float


class KnownTasks:
    """The tasks of the workers heard lately, with their payload schemas."""

    def __init__(self) -> None:
        self._workers: dict[str, Heard] = {}
        #: Whether any worker ever announced: before, nothing is judged unknown.
        self.judging = False

    def heard(self, body: bytes, now: float | None = None) -> None:
        """Take one announcement; a malformed one is left out."""
        try:
            data = orjson.loads(body)
            worker, tasks, leaving = data["worker"], data["tasks"], data.get("leaving", False)
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return
        if not isinstance(worker, str) or not isinstance(tasks, dict):
            return
        self.judging = True
        if leaving:
            self._workers.pop(worker, None)
            return
        names = {name: schema for name, schema in tasks.items() if valid_name(name)}
        self._workers[worker] = Heard(names, time.monotonic() if now is None else now)

    def live(self, now: float | None = None) -> dict[str, Any]:
        """Every task a live worker registered, sorted, with its payload schema (or None)."""
        moment = time.monotonic() if now is None else now
        found: dict[str, Any] = {}
        for heard in self._workers.values():
            if moment - heard.at <= LIVE_SECONDS:
                for name, schema in heard.tasks.items():
                    found[name] = found.get(name) or schema
        return dict(sorted(found.items()))

    def unknown(self, task: str, now: float | None = None) -> list[str] | None:
        """The live tasks when ``task`` is none of them (and workers announce), else None."""
        if not self.judging:
            return None
        known = self.live(now)
        return None if task in known else list(known)


def valid_name(name: object) -> bool:
    """A task name a worker could have registered."""
    if not isinstance(name, str):
        return False
    try:
        check_task(name)
    except ValueError:
        return False
    return True
