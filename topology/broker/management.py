"""The few management-API reads ``warren doctor`` and ``warren namespace delete`` make when
given ``--management-url``.

What AMQP cannot tell: the names of the queues and exchanges (to find all of a namespace),
the metadata store (feature flag ``khepri_db``), the cluster's nodes, the exchange types the
plugins add, and a queue's policy (a delivery limit or consumer timeout set by policy
overrides nothing warren declares, but applies). Credentials come from the URL
(``http://user:pass@host:15672/``), else from the AMQP URL; they never appear in an error.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

import aiohttp


class ManagementError(RuntimeError):
    """The management API did not answer as asked."""


def vhost_and_auth(url: str) -> tuple[str, tuple[str, str]]:
    """The virtual host and credentials of an AMQP URL (RabbitMQ's defaults where absent)."""
    parts = urlsplit(url)
    vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
    return vhost, (unquote(parts.username or "guest"), unquote(parts.password or "guest"))


class Management:
    """A management API at ``url`` for virtual host ``vhost``."""

    def __init__(self, url: str, vhost: str, fallback_auth: tuple[str, str]) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError("--management-url must be an http:// or https:// URL with a host")
        user, password = (parts.username, parts.password or "") if parts.username else fallback_auth
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        self.base = urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))
        self.vhost = quote(vhost, safe="")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self._headers = {"Authorization": f"Basic {token}"}

    async def get(self, path: str) -> Any:
        """The JSON at ``/api/<path>``; None for a 404."""
        timeout = aiohttp.ClientTimeout(total=15)
        try:
            async with (
                aiohttp.ClientSession(headers=self._headers, timeout=timeout) as session,
                session.get(f"{self.base}/api/{path}") as response,
            ):
                if response.status == 404:
                    return None
                if response.status in {401, 403}:
                    raise ManagementError(
                        f"{self.base} refused the credentials ({response.status}): give a user "
                        "with the monitoring tag in --management-url (http://user:pass@host:port)"
                    )
                response.raise_for_status()
                return await response.json()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise ManagementError(
                f"no management API at {self.base}: {type(error).__name__}; is the "
                "rabbitmq_management plugin enabled, and the port right (15672 by default)?"
            ) from None

    async def overview(self) -> dict[str, Any]:
        """``/api/overview``: versions and exchange types."""
        found: dict[str, Any] = await self.get("overview") or {}
        return found

    async def khepri(self) -> bool | None:
        """Whether the ``khepri_db`` feature flag is enabled; None when the broker has none."""
        flags = await self.get("feature-flags") or []
        states = {flag.get("name"): flag.get("state") for flag in flags}
        return None if "khepri_db" not in states else states["khepri_db"] == "enabled"

    async def node_count(self) -> int:
        """Nodes of the cluster, running or not."""
        return len(await self.get("nodes") or [])

    async def queue(self, name: str) -> dict[str, Any] | None:
        """A queue's details (arguments, policy, consumers), or None when it does not exist."""
        found: dict[str, Any] | None = await self.get(f"queues/{self.vhost}/{quote(name, safe='')}")
        return found

    async def names(self, kind: str) -> list[str]:
        """The name of every ``"queues"`` or ``"exchanges"`` of the virtual host."""
        found = await self.get(f"{kind}/{self.vhost}?columns=name") or []
        return [str(item["name"]) for item in found]
