"""What a run over the failed queue did, and how it reports progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

#: Called with (messages read so far, messages read plus those still ready behind).
Progress = Callable[[int, int], None]


@dataclass
class Tally:
    """What a run did: records read, matched, moved, and those that could not be moved."""

    scanned: int = 0
    matched: int = 0
    moved: int = 0
    failed: int = 0
    #: Records sent again after their first copy went out unconfirmed when the broker went
    #: away: their task may run twice.
    resent: int = 0
    reconnects: int = 0
    errors: list[str] = field(default_factory=list)
