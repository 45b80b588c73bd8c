"""How many wrong tokens one client address may send before it must wait.

After ``failures`` wrong tokens within ``seconds`` (a login or a bearer token), the address
is locked out for ``seconds``: every try is refused unchecked, the right token too, so a
guess can never be confirmed during the lockout. A right token clears the count. The table
of addresses is bounded: the least recently seen goes first, so an attacker rotating
addresses costs a fixed amount of memory.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

#: Addresses remembered at once (a few hundred bytes each).
MAX_CLIENTS = 10_000


@dataclass
class _Client:
    failed_at: list[float] = field(default_factory=list)
    locked_until: float = 0.0


class LoginThrottle:
    """Wrong tokens per client address, and the lockouts they earned."""

    def __init__(
        self,
        failures: int,
        seconds: float,
        clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.failures, self.seconds, self.clients = failures, seconds, clients
        self.clock = clock
        self._table: OrderedDict[str, _Client] = OrderedDict()

    def wait(self, address: str) -> float:
        """Seconds ``address`` must wait before its next try; 0 when it may try now."""
        client = self._table.get(address)
        return 0.0 if client is None else max(0.0, client.locked_until - self.clock())

    def failed(self, address: str) -> None:
        """Count a wrong token from ``address``; the last one allowed locks it out."""
        now = self.clock()
        client = self._table.pop(address, None) or _Client()
        self._table[address] = client  # now the most recently seen
        client.failed_at = [at for at in client.failed_at if at > now - self.seconds] + [now]
        if len(client.failed_at) >= self.failures:
            client.failed_at, client.locked_until = [], now + self.seconds
        while len(self._table) > self.clients:
            self._table.popitem(last=False)

    def succeeded(self, address: str) -> None:
        """Forget the wrong tokens of ``address``."""
        self._table.pop(address, None)

    def __len__(self) -> int:
        return len(self._table)
