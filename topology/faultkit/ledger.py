"""The ledger oracle: every publish, attempt and failed record in SQLite, then one verdict per task.

Like Jepsen's RabbitMQ checker, each run id the broker confirmed is classified at the end:

- ``completed``: exactly one attempt succeeded and no failure record exists;
- ``failed``: exactly one record reached the failed queue and no attempt succeeded;
- ``duplicated``: more than one of those outcomes (at-least-once allows it, but only where
  the ledger shows why: a redelivered attempt, a second publish, a retry after the record,
  a retry that ran twice (quorum queues dead-letter at least once), or a record that had to
  fall back to dead-lettering);
- ``lost``: none of them. Lost must be zero in every test.

Worker processes write attempts concurrently, so the database runs in WAL mode and every
write is one short transaction.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS published (
    run_id TEXT PRIMARY KEY, kind TEXT NOT NULL, publishes INTEGER NOT NULL, confirmed INTEGER
);
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, pid INTEGER NOT NULL, attempt INTEGER NOT NULL,
    redelivered INTEGER NOT NULL, started REAL NOT NULL, outcome TEXT, ended REAL
);
CREATE TABLE IF NOT EXISTS failed (
    fingerprint TEXT PRIMARY KEY, run_id TEXT NOT NULL, reason TEXT NOT NULL,
    attempts INTEGER, raw INTEGER NOT NULL, error TEXT
);
"""


class Fate(StrEnum):
    """Where one run id ended."""

    LOST = "lost"
    COMPLETED = "completed"
    FAILED = "failed"
    DUPLICATED = "duplicated"


@dataclass
class Run:
    """Everything the ledger knows about one run id."""

    run_id: str
    kind: str = "?"
    publishes: int = 0
    confirmed: bool = False
    attempts: list[tuple[int, bool, str | None]] = field(default_factory=list)
    records: list[tuple[str, int | None, bool]] = field(default_factory=list)

    @property
    def successes(self) -> int:
        """Attempts whose handler returned."""
        return sum(outcome == "ok" for _, _, outcome in self.attempts)

    @property
    def fate(self) -> Fate:
        """Lost, completed, failed or duplicated."""
        outcomes = self.successes + len(self.records)
        if outcomes == 0:
            return Fate.LOST
        if outcomes > 1:
            return Fate.DUPLICATED
        return Fate.COMPLETED if self.successes else Fate.FAILED

    @property
    def reasons(self) -> list[str]:
        """Reasons of the failure records, in the order they were collected."""
        return [reason for reason, _, _ in self.records]

    def explained(self) -> bool:
        """True when the ledger shows why a duplicated run id ran more than once."""
        redelivered = any(redelivered for _, redelivered, _ in self.attempts)
        fallback = any(raw for _, _, raw in self.records)
        recorded_at = [n for _, n, raw in self.records if not raw and n is not None]
        retried_after = bool(recorded_at) and any(
            attempt > min(recorded_at) for attempt, _, _ in self.attempts
        )
        numbers = [attempt for attempt, _, _ in self.attempts]
        # Quorum queues dead-letter at least once: after a broker crash a retry may arrive twice.
        repeated_retry = any(numbers.count(n) > 1 for n in set(numbers) if n > 1)
        return redelivered or fallback or retried_after or repeated_retry or self.publishes > 1


@dataclass
class Report:
    """The verdict on every run id of a ledger."""

    runs: dict[str, Run]
    unexpected: list[str]

    def of(self, fate: Fate) -> list[Run]:
        """Confirmed runs that ended with ``fate``."""
        return [run for run in self.runs.values() if run.confirmed and run.fate is fate]

    @property
    def lost(self) -> list[str]:
        """Run ids the broker confirmed that neither completed nor reached the failed queue."""
        return [run.run_id for run in self.of(Fate.LOST)]

    @property
    def unexplained(self) -> list[str]:
        """Duplicated run ids without a redelivery, retry or second publish to explain them."""
        return [run.run_id for run in self.of(Fate.DUPLICATED) if not run.explained()]

    def counts(self) -> Counter[Fate]:
        """How many confirmed run ids ended in each fate."""
        return Counter(run.fate for run in self.runs.values() if run.confirmed)

    def table(self) -> str:
        """The classification as a small text table, with the breakdown by kind."""
        counts = self.counts()
        lines = [f"{'fate':<12}{'tasks':>8}"]
        lines += [f"{fate.value:<12}{counts[fate]:>8}" for fate in Fate]
        lines.append(f"{'unexpected':<12}{len(self.unexpected):>8}")
        lines.append(f"{'unexplained':<12}{len(self.unexplained):>8}")
        lines.append("")
        lines.append(f"{'kind':<12}{'fate':<12}{'reason':<22}{'tasks':>8}")
        for (kind, fate, reason), n in sorted(self._breakdown().items()):
            lines.append(f"{kind:<12}{fate:<12}{reason:<22}{n:>8}")
        return "\n".join(lines)

    def _breakdown(self) -> Counter[tuple[str, str, str]]:
        return Counter(
            (run.kind, run.fate.value, ",".join(sorted(set(run.reasons))) or "-")
            for run in self.runs.values()
            if run.confirmed
        )


class Ledger:
    """An SQLite file shared by the test, the publishers and every worker process."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path, timeout=60, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        """Close this process's connection."""
        self._db.close()

    def publishing(self, run_id: str, kind: str) -> None:
        """Note a publish about to be tried (again) for ``run_id``."""
        self._db.execute(
            "INSERT INTO published VALUES (?, ?, 1, 0) "
            "ON CONFLICT(run_id) DO UPDATE SET publishes = publishes + 1",
            (run_id, kind),
        )

    def confirmed(self, run_id: str) -> None:
        """Note that the broker confirmed a publish of ``run_id``."""
        self._db.execute("UPDATE published SET confirmed = 1 WHERE run_id = ?", (run_id,))

    def attempt_started(self, run_id: str, pid: int, attempt: int, redelivered: bool) -> int:
        """Note an attempt as it starts; returns its row for ``attempt_ended``."""
        cursor = self._db.execute(
            "INSERT INTO attempts (run_id, pid, attempt, redelivered, started) "
            "VALUES (?, ?, ?, ?, julianday('now'))",
            (run_id, pid, attempt, int(redelivered)),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def attempt_ended(self, row: int, outcome: str) -> None:
        """Note how an attempt ended: ``ok`` (handler returned), ``retryable``, ``permanent``."""
        self._db.execute(
            "UPDATE attempts SET outcome = ?, ended = julianday('now') WHERE id = ?", (outcome, row)
        )

    def failed_record(
        self,
        fingerprint: str,
        run_id: str,
        reason: str,
        attempts: int | None,
        raw: bool,
        error: str | None = None,
    ) -> None:
        """Note a message found in the failed queue (a second delivery of it is ignored)."""
        self._db.execute(
            "INSERT OR IGNORE INTO failed VALUES (?, ?, ?, ?, ?, ?)",
            (fingerprint, run_id, reason, attempts, int(raw), error),
        )

    def error_of(self, run_id: str) -> str:
        """The errors of ``run_id``'s failure records, one a line."""
        rows = self._db.execute("SELECT error FROM failed WHERE run_id = ?", (run_id,))
        return "\n".join(error or "" for (error,) in rows)

    def attempts_of(self, run_id: str) -> list[tuple[int, int, bool, str | None]]:
        """(pid, attempt, redelivered, outcome) of every attempt of ``run_id``, in order."""
        rows = self._db.execute(
            "SELECT pid, attempt, redelivered, outcome FROM attempts WHERE run_id = ? ORDER BY id",
            (run_id,),
        )
        return [(pid, n, bool(r), outcome) for pid, n, r, outcome in rows]

    def overlapping(self, run_id: str) -> list[tuple[int, int]]:
        """Pids of pairs of ``run_id``'s attempts that ran at the same time (an attempt with no
        end runs on): what an overlap lock must prevent."""
        rows = self._db.execute(
            "SELECT a.pid, b.pid FROM attempts a JOIN attempts b ON a.id < b.id "
            "AND b.started < coalesce(a.ended, 1e9) AND a.started < coalesce(b.ended, 1e9) "
            "WHERE a.run_id = ? AND b.run_id = ?",
            (run_id, run_id),
        )
        return [(a, b) for a, b in rows]

    def count_confirmed(self) -> int:
        """Run ids the broker confirmed so far."""
        return int(self._db.execute("SELECT count(*) FROM published WHERE confirmed").fetchone()[0])

    def count_attempts(self) -> int:
        """Attempts recorded so far, by every process."""
        return int(self._db.execute("SELECT count(*) FROM attempts").fetchone()[0])

    def report(self) -> Report:
        """Classify every run id the ledger has seen."""
        runs: dict[str, Run] = {}
        for run_id, kind, publishes, confirmed in self._db.execute("SELECT * FROM published"):
            runs[run_id] = Run(run_id, kind, publishes, bool(confirmed))
        unexpected: set[str] = set()
        for run_id, n, redelivered, outcome in self._db.execute(
            "SELECT run_id, attempt, redelivered, outcome FROM attempts ORDER BY id"
        ):
            if run_id in runs:
                runs[run_id].attempts.append((n, bool(redelivered), outcome))
            else:
                unexpected.add(run_id)
        for run_id, reason, attempts, raw in self._db.execute(
            "SELECT run_id, reason, attempts, raw FROM failed"
        ):
            if run_id in runs:
                runs[run_id].records.append((reason, attempts, bool(raw)))
            else:
                unexpected.add(run_id)
        return Report(runs, sorted(unexpected))
