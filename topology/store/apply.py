"""``warren schedules apply FILE``: the difference between a schedules file and the store.

The file is the declarative source of the schedules it names. Each applied change records
the file as the schedule's *manager* (``Entry.manager``) and the version it made
(``Entry.applied``), so the next apply knows which schedules it manages (``--prune``
archives those the file no longer names) and whether someone changed one in the store since
(a conflict, unless ``--force``). Schedules created at runtime are touched only when the
file names them (then the file takes them over). The plan is worked out whole before
anything is written: one conflict and nothing changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from warren_cron.errors import InvalidSchedule
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.changes import Entry, spec_json
from warren_cron.store.masking import kept_spec, masked_payload

Action = Literal["create", "change", "adopt", "same", "archive"]
#: The manager the scheduler records when it applies its own file on a reload: one name for
#: every scheduler of the namespace, wherever each keeps its copy of the file.
SCHEDULER_FILE = "CRON_SCHEDULES_FILE"
#: Specs planned between two turns of the event loop.
PLAN_CHUNK = 2_000


@dataclass(frozen=True, slots=True)
class Step:
    """What an apply does to one schedule."""

    action: Action
    name: str
    #: The version the change is based on (0 for a create).
    previous: int
    spec: ScheduleSpec | None = None
    #: ``field: old -> new`` lines of a change.
    diff: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Plan:
    """Every step of one apply, and the conflicts that stop it."""

    steps: list[Step] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)

    def changes(self) -> list[Step]:
        """The steps that write to the store."""
        return [step for step in self.steps if step.action != "same"]


@dataclass(frozen=True, slots=True)
class Options:
    """How one apply runs: which file manages, what the deployment's own file names."""

    manager: str
    file_names: frozenset[str]
    prune: bool = False
    force: bool = False


async def plan_apply(
    specs: Iterable[ScheduleSpec], entries: dict[str, Entry], options: Options
) -> Plan:
    """The steps that make the store hold ``specs``; conflicts listed, nothing decided;
    ``entries``: the store's, copied (the plan reads them across turns of the loop). The
    event loop runs every ``PLAN_CHUNK`` specs (a lazy ``specs`` is decoded as it goes):
    a leader that planned a file of 1,000,000 at once held its loop for 20 s, lost its
    lease and its connection (heartbeats unanswered), and planned again, for ever."""
    plan, named = Plan(), set()
    for index, spec in enumerate(specs, 1):
        named.add(spec.name)
        _plan_one(spec, entries.get(spec.name), options, plan)
        if index % PLAN_CHUNK == 0:
            await asyncio.sleep(0)
    if options.prune:
        plan.steps += await _pruned(entries, named, options.manager)
    return plan


async def _pruned(entries: dict[str, Entry], named: set[str], manager: str) -> list[Step]:
    """Archive steps, by name, for ``manager``'s active schedules not ``named``. Looked for
    among every entry, ``PLAN_CHUNK`` between two turns of the loop: with a million runtime
    schedules in the store, sorting them all held it for a second and a half (and a list of
    them made first took a second more, in garbage collections)."""
    gone: list[Step] = []
    for index, (name, entry) in enumerate(entries.items(), 1):
        if entry.manager == manager and entry.status == "active" and name not in named:
            gone.append(Step("archive", name, entry.version))
        if index % PLAN_CHUNK == 0:
            await asyncio.sleep(0)
    return sorted(gone, key=lambda step: step.name)


def _plan_one(spec: ScheduleSpec, entry: Entry | None, options: Options, plan: Plan) -> None:
    name = spec.name
    if name in options.file_names:
        plan.conflicts.append(
            f"{name}: the scheduler's own schedules file (CRON_SCHEDULES_FILE) defines it; "
            "rename it in one of the files"
        )
        return
    live = None if entry is None or entry.status == "archived" else entry
    kept = _kept(spec, live, plan)
    if kept is None:
        return
    if live is None:
        plan.steps.append(Step("create", name, 0 if entry is None else entry.version, kept))
        return
    problem = _conflict(name, live, options)
    if problem is not None:
        plan.conflicts.append(problem)
        return
    diff = field_diff(spec_json(live.spec), spec_json(kept))
    action: Action = "adopt" if live.manager is None else "change" if diff else "same"
    plan.steps.append(Step(action, name, live.version, kept, diff))


def _kept(spec: ScheduleSpec, live: Entry | None, plan: Plan) -> ScheduleSpec | None:
    """``spec`` with the masks a read showed kept as an update keeps them; None (and a
    conflict) for a mask that stands for no secret, or whose URL moved elsewhere."""
    try:
        return kept_spec(spec, None if live is None else live.spec)
    except InvalidSchedule as error:
        plan.conflicts.append(f"{spec.name}: {'; '.join(error.problems)}")
        return None


def _conflict(name: str, entry: Entry, options: Options) -> str | None:
    if entry.manager not in (None, options.manager):
        return (
            f"{name}: managed by the file {entry.manager!r}; apply that file, or archive the "
            "schedule first"
        )
    if entry.manager is not None and entry.version != entry.applied and not options.force:
        last = entry.last_change
        return (
            f"{name}: changed in the store since the last apply (version {entry.applied} -> "
            f"{entry.version}, by {last.get('by', '?')} at {last.get('at', '?')}); put the "
            "change in the file, or apply with --force to overwrite it"
        )
    return None


def field_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``field: old -> new`` for each field that differs (``-`` for one left unset)."""
    return [
        f"{key}: {_shown(old, key)} -> {_shown(new, key)}"
        for key in sorted(old.keys() | new.keys())
        if old.get(key) != new.get(key)
    ]


def _shown(fields: dict[str, Any], key: str) -> str:
    if key not in fields:
        return "-"
    # A diff lands in CI logs: a webhook's literal credentials are not shown.
    value = masked_payload(fields[key]) if key == "payload" else fields[key]
    return orjson.dumps(value).decode()
