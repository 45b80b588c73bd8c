"""The resolver of the http task's session: DNS as aiohttp does it, filtered by the policy."""

from __future__ import annotations

import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from warren_cron.errors import DestinationDenied
from warren_cron.worker.destinations import Address, DestinationPolicy, literal_address


class PolicyResolver(AbstractResolver):
    """Resolves as aiohttp does, then hands on only the addresses the policy permits."""

    def __init__(self, policy: DestinationPolicy, inner: AbstractResolver | None = None) -> None:
        self._policy = policy
        self._inner = inner or DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """The permitted addresses of ``host``; ``DestinationDenied`` when none is."""
        self._policy.check_host(host)
        found = await self._inner.resolve(host, port, family)
        verdicts = [(r, self._policy.refusal(host, _address(r))) for r in found]
        permitted = [r for r, refused in verdicts if refused is None]
        if not permitted:
            # Several records (one per socket type) may share an address: named once each.
            shown = "; ".join(dict.fromkeys(str(refused) for _, refused in verdicts))
            raise DestinationDenied(f"host {host} resolves only to refused addresses: {shown}")
        return permitted

    async def close(self) -> None:
        """Close the resolver underneath."""
        await self._inner.close()


def _address(result: ResolveResult) -> Address:
    address = literal_address(result["host"])
    assert address is not None, result
    return address
