"""Where the ``http`` task may connect: ``CRON_HTTP_ALLOW`` and ``CRON_HTTP_DENY``.

Anyone who can publish a task chooses its URL, so the worker checks the address it actually
connects to, after DNS, not only the name in the URL: a name that resolves to a denied address
is refused too. Each rule is a host name (``hooks.example.com``), a wildcard (``*.example.com``:
any name below it, not the name itself) or an address or CIDR (``10.0.0.0/8``, ``fd00::1``).

- A host name matching a deny rule, or an address in a denied network, is refused.
- With allow rules, a destination must match one: its host name, or the address connected to.
- Deny wins over allow. Without allow rules, everything not denied is allowed: internal
  services (private and loopback addresses) are the usual target.
- The unspecified addresses (``0.0.0.0/8``, ``::``) are refused whatever the rules say.
- An IPv6 address that carries an IPv4 one (IPv4-mapped, 6to4, NAT64's well-known and
  local-use prefixes, IPv4-compatible, Teredo) is judged as both: a rule on either applies.
- A host whose last label is a number (``2130706433``, ``0177.0.0.1``, ``0x7f.1``, ``127.1``,
  ``0``) is judged as the IPv4 address the C library's ``inet_aton`` reads in it, then refused
  whatever the verdict: such spellings are always refused, naming the address meant.

Names in URLs are checked before anything is sent; addresses are checked twice: a literal
address in the URL before sending (aiohttp does not resolve those), every name's addresses in
the resolver (``worker.resolver``), which hands aiohttp only the permitted ones. Numeric hosts
are decided here, before and without any resolver: aiohttp before 3.14.1 connects to an
all-digit host without asking the resolver, and the system's resolver reads inet_aton's forms.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network
from typing import Any, Final

import structlog

from warren_cron.errors import DestinationDenied

log = structlog.get_logger("warren_cron.worker.destinations")

Address = IPv4Address | IPv6Address
#: Where clouds serve instance credentials: most at 169.254.169.254, EC2 also at
#: fd00:ec2::254, Alibaba Cloud at 100.100.100.200. A policy that permits one is warned about.
METADATA = (
    IPv4Address("169.254.169.254"),
    IPv6Address("fd00:ec2::254"),
    IPv4Address("100.100.100.200"),
)
#: Link-local (169.254.169.254 among it, IPv6 link-local) and the other metadata addresses.
DEFAULT_DENY = ("169.254.0.0/16", "fe80::/10", "fd00:ec2::254", "100.100.100.200")


def literal_address(host: str) -> Address | None:
    """The address a URL's host names literally (``127.0.0.1``, ``::1``), or None for a name."""
    try:
        return ip_address(host.partition("%")[0])
    except ValueError:
        return None


#: A label only a number can be, as URL parsers read it (WHATWG's "ends in a number"):
#: decimal, or hexadecimal after 0x. No top-level domain is one, so a host ending in one means
#: an IPv4 address, or nothing.
NUMBER_LABEL: Final = re.compile(r"[0-9]+|0[xX][0-9a-fA-F]*")
#: The characters of inet_aton's forms: inet_aton itself ignores what follows a space.
INET_ATON_FORM: Final = re.compile(r"[0-9a-fA-FxX.]+")


def numeric_host(host: str) -> bool:
    """True when the host's last label is a number: it can only mean an IPv4 address."""
    return NUMBER_LABEL.fullmatch(host.rstrip(".").rpartition(".")[2]) is not None


def inet_aton_address(host: str) -> IPv4Address | None:
    """The IPv4 address inet_aton reads in a host (``2130706433``, ``017700000001``,
    ``0177.0.0.1``, ``0x7f.1``, ``127.1``, with or without the root's dot), else None."""
    text = host.removesuffix(".")
    if INET_ATON_FORM.fullmatch(text) is None:
        return None
    try:
        return IPv4Address(socket.inet_aton(text))
    except OSError:
        return None


#: Only ever a source address (RFC 1122, RFC 4291). As a destination Linux, BSD and macOS
#: connect it to this host itself, past any rule written for loopback, and no service is
#: ever meant by it: it is refused whatever the rules say rather than guessed at.
UNSPECIFIED: Final = (ip_network("0.0.0.0/8"), ip_network("::/128"))
#: NAT64's well-known prefix (RFC 6052) and the local-use one (RFC 8215): a gateway connects
#: to the IPv4 address in the last 32 bits, as a /96 under either puts it. Deprecated
#: IPv4-compatible addresses (``::a.b.c.d``) put it in the same place.
NAT64: Final = (ip_network("64:ff9b::/96"), ip_network("64:ff9b:1::/48"))
IPV4_COMPATIBLE: Final = ip_network("::/96")
UNSPECIFIED_TEXT = (
    "is unspecified (0.0.0.0/8, ::): it reaches this host, so it is always refused; "
    "name the address meant, such as 127.0.0.1"
)


def carried(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 one is delivered to: mapped, 6to4, NAT64, compatible, Teredo."""
    if found := address.ipv4_mapped or address.sixtofour:
        return found
    # ``::`` and ``::1`` lie in ::/96 too, and are themselves.
    compatible = address in IPV4_COMPATIBLE and int(address) > 1
    if compatible or any(address in prefix for prefix in NAT64):
        return IPv4Address(int(address) & 0xFFFF_FFFF)
    return address.teredo[1] if address.teredo else None


def forms(address: Address) -> tuple[Address, ...]:
    """The address, and the IPv4 address it carries if any: rules apply to each of them."""
    inner = carried(address) if isinstance(address, IPv6Address) else None
    return (address,) if inner is None else (address, inner)


def host_name(host: str) -> str:
    """A host name as rules compare it: lower case, without the root's trailing dot."""
    return host.rstrip(".").lower()


@dataclass(frozen=True, slots=True)
class Rules:
    """One list of rules: exact names, wildcard suffixes and networks."""

    names: frozenset[str]
    suffixes: tuple[str, ...]
    networks: tuple[Any, ...]

    @classmethod
    def parse(cls, entries: Iterable[str]) -> Rules:
        """Rules from a setting's entries, or ``ValueError`` naming the entry that is wrong."""
        names, suffixes, networks = set(), [], []
        for entry in (e.strip() for e in entries):
            if entry.startswith("*."):
                suffixes.append(host_name(entry[1:]))
            elif literal_address(entry.partition("/")[0]) is not None:
                networks.append(_network(entry))
            elif numeric_host(entry.partition("/")[0]):
                # As a name it would match nothing: no host ending in a number is called.
                raise ValueError(f"{entry!r} is no address: write it as a.b.c.d (or a CIDR)")
            elif entry and "*" not in entry and "/" not in entry:
                names.add(host_name(entry))
            else:
                raise ValueError(f"{entry!r} is no host name, *.domain, address or CIDR")
        return cls(frozenset(names), tuple(suffixes), tuple(networks))

    @property
    def empty(self) -> bool:
        """True when the list holds no rule."""
        return not (self.names or self.suffixes or self.networks)

    def match_name(self, name: str) -> bool:
        """True when the host name is listed or lies below a wildcard."""
        return name in self.names or name.endswith(self.suffixes)

    def match_address(self, address: Address) -> bool:
        """True when the address lies in a listed network."""
        return any(address in network for network in self.networks)


def _network(entry: str) -> Any:
    try:
        return ip_network(entry, strict=False)
    except ValueError as error:
        raise ValueError(f"{entry!r} is no CIDR ({error})") from None


#: Hosts whose verdict a policy remembers: most workers call a handful of hosts, over and over.
KNOWN_HOSTS = 4096


class DestinationPolicy:
    """Decides whether a host, and an address it resolved to, may be called."""

    def __init__(self, allow: Rules, deny: Rules) -> None:
        self.allow = allow
        self.deny = deny
        self._passed: set[str] = set()

    def check_host(self, host: str) -> None:
        """Refuse a URL's host before anything is sent: a denied name or literal address."""
        if host in self._passed:
            return
        self._judge(host)
        if len(self._passed) >= KNOWN_HOSTS:
            self._passed.clear()
        self._passed.add(host)

    def _judge(self, host: str) -> None:
        address = literal_address(host)
        if address is not None:
            if (refused := self.refusal(host, address)) is not None:
                raise DestinationDenied(refused)
        elif ":" in host:
            # aiohttp connects to any host with a colon without asking the resolver.
            raise DestinationDenied(f"host {host} is no IPv6 address: write it in full")
        elif numeric_host(host):
            self._judge_numeric(host)
        elif self.deny.match_name(host_name(host)):
            raise DestinationDenied(f"host {host_name(host)} is refused by CRON_HTTP_DENY")

    def _judge_numeric(self, host: str) -> None:
        """Refuse a host ending in a number, naming the rule its address breaks if any."""
        meant = inet_aton_address(host)
        if meant is None:
            raise DestinationDenied(
                f"host {host} ends in a number but is no IPv4 address: write a name or a.b.c.d"
            )
        if (refused := self.refusal(host, meant)) is not None:
            raise DestinationDenied(f"host {host} means {meant}: {refused}")
        # Permitted, yet clients differ on it: aiohttp 3.14.1+ refuses it, older ones and the
        # system's resolver connect to the address. One spelling means one thing everywhere.
        raise DestinationDenied(f"host {host} is a legacy spelling of {meant}: write {meant}")

    def permits(self, host: str, address: Address) -> bool:
        """True when ``address`` (which ``host`` resolved to) may be connected to."""
        return self.refusal(host, address) is None

    def refusal(self, host: str, address: Address) -> str | None:
        """Why ``address`` (which ``host`` resolved to) is refused, or None when it is not."""
        judged = forms(address)
        why = self._why(host, judged)
        if why is None:
            return None
        inner = f" ({judged[1]})" if len(judged) > 1 else ""
        return f"address {address}{inner} {why}"

    def _why(self, host: str, judged: tuple[Address, ...]) -> str | None:
        if any(a in network for a in judged for network in UNSPECIFIED):
            return UNSPECIFIED_TEXT
        if any(self.deny.match_address(a) for a in judged):
            return "is refused by CRON_HTTP_DENY"
        if self.allow.empty or self.allow.match_name(host_name(host)):
            return None
        if any(self.allow.match_address(a) for a in judged):
            return None
        return "is not allowed by CRON_HTTP_ALLOW"


def warn_if_metadata_reachable(policy: DestinationPolicy) -> None:
    """Log a warning when the policy lets http tasks reach cloud metadata (a CRON_HTTP_DENY
    set without its defaults, which it replaces)."""
    exposed = [str(a) for a in METADATA if policy.permits("", a)]
    if exposed:
        log.warning(
            "CRON_HTTP_DENY lets http tasks reach cloud metadata; add its default entries back",
            reachable=exposed,
        )
