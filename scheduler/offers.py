"""Partitions given up for peers under their share, and peers that never take them.

A scheduler gives partitions up for the peers its beats show under their share. A peer that
is no scheduler at all (a forged beat) or cannot lead (its locks not consumed) takes none:
the partitions come back to the scheduler that gave them up, a lease later, and would be
given up again at its next turn, unled for a lease each time. So when a partition given up
comes back while no peer it was given up for shows more partitions than it had then, those
peers are left out of the count for ``IGNORED_LEASES`` leases (a warning names them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import structlog

from warren_cron.schedules.heartbeats import Beat

log = structlog.get_logger("scheduler")
#: What the log says of peers left out.
NOT_COUNTED = "schedulers not counted: none took the partitions given up for them"
#: How long a peer that took none of the partitions given up for it is not counted.
IGNORED_LEASES = 10


@dataclass
class Offers:
    """The last partitions given up, for whom, and the peers not counted for now."""

    lease: float
    #: The partitions last given up, and each peer under its share then with what it led.
    given: frozenset[int] = frozenset()
    peers: dict[str, int] = field(default_factory=dict)
    came_back: bool = False
    ignored: dict[str, datetime] = field(default_factory=dict)

    def made(self, partitions: list[int], peers: Mapping[str, Beat], share: int) -> None:
        """Note ``partitions`` given up for the ``peers`` under ``share``."""
        self.given, self.came_back = frozenset(partitions), False
        self.peers = {n: len(b.partitions) for n, b in peers.items() if len(b.partitions) < share}

    def won(self, partition: int) -> None:
        """A partition was won: one given up coming back means nobody took it."""
        self.came_back = self.came_back or partition in self.given

    def counted(self, beats: Mapping[str, Beat], now: datetime) -> dict[str, Beat]:
        """``beats`` less the peers not counted now (those that took nothing offered)."""
        if self.came_back:
            took = [
                n for n, had in self.peers.items() if n in beats and len(beats[n].partitions) > had
            ]
            if not took:
                self._ignore(list(self.peers), now)
            self.given, self.peers, self.came_back = frozenset(), {}, False
        self.ignored = {n: until for n, until in self.ignored.items() if until > now}
        return {n: b for n, b in beats.items() if n not in self.ignored}

    def _ignore(self, names: list[str], now: datetime) -> None:
        until = now + timedelta(seconds=self.lease * IGNORED_LEASES)
        for name in names:
            self.ignored[name] = until
        if names:
            log.warning(
                NOT_COUNTED,
                schedulers=sorted(names),
                seconds=self.lease * IGNORED_LEASES,
                why="a beat not sent by a scheduler, or a scheduler that cannot lead",
            )
