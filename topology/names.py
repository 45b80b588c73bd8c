"""Queue and exchange names: pure functions of one namespace.

With the default namespace ``cron`` the names are exactly those of the design:
``cron_tasks``, ``cron_scheduler``, ``cron_dlx``, ``cron_scheduler_retry.<plan>``,
``cron_scheduler_failed`` and ``cron_monitor``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

#: Routing key of the last attempt: its NACK lands in the failed queue.
FINAL_KEY = "final"
#: Routing key of failure records the worker publishes itself.
FAILED_KEY = "failed"
#: Delay levels: level n holds a message 2^n s, so 28 of them reach 2^28 - 1 s (~8.5 years).
DELAY_LEVELS = 28
#: The longest delay the levels can hold, in seconds (about 8.5 years).
MAX_DELAY_SECONDS = 2**DELAY_LEVELS - 1


@dataclass(frozen=True, slots=True)
class Names:
    """Every broker object name of one namespace."""

    namespace: str = "cron"

    @property
    def tasks_exchange(self) -> str:
        """Topic exchange that publishers send tasks to."""
        return f"{self.namespace}_tasks"

    @property
    def main_queue(self) -> str:
        """Queue the workers consume."""
        return f"{self.namespace}_scheduler"

    @property
    def dlx(self) -> str:
        """Direct exchange that rejected messages are dead-lettered to."""
        return f"{self.namespace}_dlx"

    @property
    def unrouted_exchange(self) -> str:
        """Alternate exchange of the DLX: catches keys with no retry queue."""
        return f"{self.namespace}_dlx.unrouted"

    @property
    def failed_queue(self) -> str:
        """Store of record for tasks whose plan is spent or that failed for good."""
        return f"{self.namespace}_scheduler_failed"

    @property
    def monitor_queue(self) -> str:
        """Copy of everything reaching the failed queue, for the monitor."""
        return f"{self.namespace}_monitor"

    @property
    def retry_prefix(self) -> str:
        """Common prefix of every retry queue name."""
        return f"{self.namespace}_scheduler_retry."

    def retry_queue(self, plan_key: str) -> str:
        """Retry queue that holds messages whose remaining plan is ``plan_key``."""
        return f"{self.retry_prefix}{plan_key}"

    @property
    def leader_queue(self) -> str:
        """Exclusive queue held by the scheduler that is allowed to publish."""
        return f"{self.namespace}_scheduler.leader"

    @property
    def watermark_queue(self) -> str:
        """One-message queue holding the scheduler's published-up-to time."""
        return f"{self.namespace}_scheduler.watermark"

    def partition_leader_queue(self, partition: int, count: int) -> str:
        """The lock of ``partition`` of ``count``: the one leader queue when there is one."""
        return self.leader_queue if count == 1 else f"{self.leader_queue}.{partition}"

    def partition_watermark_queue(self, partition: int, count: int) -> str:
        """The watermark of ``partition`` of ``count``: the one watermark when there is one."""
        return self.watermark_queue if count == 1 else f"{self.watermark_queue}.{partition}"

    def partition_queues(self, count: int) -> list[str]:
        """Every partition's lock and watermark (none of their own when there is one)."""
        if count == 1:
            return []
        parts = range(count)
        locks = [self.partition_leader_queue(p, count) for p in parts]
        return [*locks, *(self.partition_watermark_queue(p, count) for p in parts)]

    @property
    def history_stream(self) -> str:
        """Stream of every event of every run (``topology/history/``)."""
        return f"{self.namespace}_history"

    @property
    def control_stream(self) -> str:
        """Stream of pause and resume commands: the durable state of each schedule."""
        return f"{self.namespace}_control"

    @property
    def cancels_stream(self) -> str:
        """Stream of cancels: tombstones of runs and archived schedules (``topology/cancel/``)."""
        return f"{self.namespace}_cancels"

    @property
    def store_log(self) -> str:
        """Stream of changes to the runtime schedules (create, update, archive)."""
        return f"{self.namespace}_schedules"

    @property
    def store_snapshot(self) -> str:
        """One-message queue holding the newest snapshot of the runtime schedules."""
        return f"{self.namespace}_schedules.snapshot"

    @property
    def store_snapshot_parts(self) -> str:
        """Stream of the parts of snapshots too large for one message (``store/parts.py``)."""
        return f"{self.namespace}_schedules.snapshot.parts"

    @property
    def beat_stream(self) -> str:
        """Short stream of every scheduler's heartbeat: who leads, who stands by, how late."""
        return f"{self.namespace}_scheduler.beats"

    @property
    def status_queue(self) -> str:
        """One-message queue holding the monitor's fold of the history, per schedule."""
        return f"{self.namespace}_status"

    def queues(self, plan_keys: Iterable[str]) -> list[str]:
        """The namespace's queues a clean-up deletes: the fixed ones and the retry queue of
        each of ``plan_keys`` (the delay levels are ``topology.delay.delay_objects``')."""
        fixed = [self.main_queue, self.failed_queue, self.monitor_queue, self.leader_queue]
        fixed += [self.watermark_queue, self.history_stream, self.control_stream]
        fixed += [self.store_log, self.store_snapshot, self.status_queue, self.beat_stream]
        fixed += [self.cancels_stream, self.store_snapshot_parts]
        return [*fixed, *(self.retry_queue(key) for key in plan_keys)]

    @property
    def exchanges(self) -> list[str]:
        """The namespace's exchanges but the delay levels'."""
        return [
            self.tasks_exchange,
            self.dlx,
            self.unrouted_exchange,
            self.flow_exchange,
            self.known_tasks_exchange,
        ]

    @property
    def per_key_prefixes(self) -> list[str]:
        """Prefixes of the queues made per key (idempotency keys, crash marks, run locks,
        concurrency slots, rate windows): a clean-up deletes every queue named with one.
        The slots and locks are exclusive and the windows expire unused, so they go by
        themselves; the others stay until deleted."""
        ns = self.namespace
        return [f"{ns}_key.", f"{ns}_crash.", f"{ns}_lock.", f"{ns}_slot.", f"{ns}_rate."]

    @property
    def flow_exchange(self) -> str:
        """Fanout the workers share their http counts on (auto-deleted, ``worker/fleet.py``)."""
        return f"{self.namespace}_flow"

    @property
    def known_tasks_exchange(self) -> str:
        """Fanout the workers announce their tasks on (auto-deleted, ``known_tasks.py``)."""
        return f"{self.namespace}_known_tasks"

    def slot_queue(self, key_digest: str, index: int) -> str:
        """Exclusive queue that is concurrency slot ``index`` of a key (``worker/slots.py``)."""
        return f"{self.namespace}_slot.{key_digest}.{index}"

    def rate_window(self, key_digest: str) -> str:
        """Queue that is a key's rate window (``worker/rates.py``)."""
        return f"{self.namespace}_rate.{key_digest}"

    @property
    def delay_prefix(self) -> str:
        """Common prefix of the delay levels' exchanges and queues (``topology/delay.py``)."""
        return f"{self.namespace}_delay."

    def delay_level(self, level: int) -> str:
        """Exchange and queue of delay level ``level``: the queue holds messages 2^level s."""
        return f"{self.delay_prefix}{level}"

    @property
    def delay_exchange(self) -> str:
        """Where delayed tasks are published: the exchange of the highest delay level."""
        return self.delay_level(DELAY_LEVELS - 1)

    @property
    def delay_deliver_exchange(self) -> str:
        """Topic exchange that due tasks leave the delay levels by."""
        return f"{self.delay_prefix}deliver"

    def delay_landing(self, plan_key: str) -> str:
        """Queue giving a due task its retry plan back as routing key, on its way to the main
        queue."""
        return f"{self.delay_prefix}land.{plan_key}"

    def key_queue(self, digest: str) -> str:
        """One-message queue recording that an idempotency key was used (``topology/client``)."""
        return f"{self.namespace}_key.{digest}"

    def lock_queue(self, schedule: str) -> str:
        """Exclusive queue held by a running attempt of ``schedule``."""
        return f"{self.namespace}_lock.{schedule}"

    def lock_holder_queue(self, schedule: str, run_id: str) -> str:
        """Exclusive queue beside the lock naming the run that holds it (by a digest: a run id
        may be longer than a queue name can be)."""
        digest = hashlib.sha256(run_id.encode()).hexdigest()[:16]
        return f"{self.lock_queue(schedule)}.held-by.{digest}"

    def crash_queue(self, key: str) -> str:
        """Markers of worker deaths during one attempt (classic queues, ``worker/crashloop.py``)."""
        return f"{self.namespace}_crash.{key}"
