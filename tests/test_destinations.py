"""Destination policy: the defaults as decisions, and the connect-time check on loopback only.

Nothing here connects anywhere but loopback: the default deny list (link-local, metadata) is
checked as a decision of the policy, and the check after DNS with deny rules on loopback.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from ipaddress import ip_address
from typing import Any

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult
from structlog.testing import capture_logs

from tests.test_http import CTX
from tests.webhook import Endpoint, serve
from warren_cron.errors import DestinationDenied, SettingsError
from warren_cron.runtime.settings import load_settings
from warren_cron.worker.destinations import DestinationPolicy, Rules, warn_if_metadata_reachable
from warren_cron.worker.http import HttpHandler
from warren_cron.worker.resolver import PolicyResolver
from warren_cron.worker.settings import WorkerSettings

Handler = Callable[..., HttpHandler]


def policy(allow: str = "", deny: str | None = None) -> DestinationPolicy:
    """The policy of a worker with these CRON_HTTP_ALLOW / CRON_HTTP_DENY values."""
    values: dict[str, Any] = {"http_allow": allow}
    if deny is not None:
        values["http_deny"] = deny
    return WorkerSettings(**values).destination_policy()


#: 169.254.169.254 inside IPv6 addresses: mapped, 6to4, NAT64 (both spellings), IPv4-compatible
#: and Teredo (whose client address is stored inverted).
METADATA_IN_IPV6 = [
    "::ffff:169.254.169.254",
    "2002:a9fe:a9fe::1",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::169.254.169.254",
    "::169.254.169.254",
    "2001:0:4136:e378:8000:63bf:5601:5601",
    # NAT64's local-use prefix (RFC 8215), a /96 under 64:ff9b:1::/48 as a gateway uses it.
    "64:ff9b:1::a9fe:a9fe",
    "64:ff9b:1:ab:cd::169.254.169.254",
]
#: Alibaba Cloud's metadata service, literal and through NAT64's prefixes.
ALIBABA = ["100.100.100.200", "64:ff9b::6464:64c8", "64:ff9b:1::100.100.100.200"]


@pytest.mark.parametrize(
    "address",
    ["169.254.169.254", "169.254.0.1", "fe80::1", "fd00:ec2::254", *METADATA_IN_IPV6, *ALIBABA],
)
def test_link_local_and_metadata_addresses_are_denied_by_default(address: str) -> None:
    """Cloud metadata and link-local addresses, literal, resolved or carried in IPv6 addresses,
    are refused by default."""
    assert not policy().permits("metadata.internal", ip_address(address.partition("%")[0]))
    with pytest.raises(DestinationDenied, match="refused"):
        policy().check_host(address)


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "10.1.2.3", "192.168.0.5", "8.8.8.8"])
def test_private_loopback_and_public_addresses_are_allowed_by_default(address: str) -> None:
    """Internal services are the usual target: only link-local and metadata are denied."""
    assert policy().permits("svc", ip_address(address))


@pytest.mark.parametrize(
    ("allow", "deny", "host", "address", "permitted"),
    [
        ("", "*.corp.test", "db.corp.test", "10.0.0.1", True),  # names are checked before DNS
        ("*.corp.test", "", "db.corp.test", "10.0.0.1", True),
        ("*.corp.test", "", "corp.test", "10.0.0.1", False),  # a wildcard names what is below
        ("*.corp.test", "", "evil.test", "10.0.0.1", False),
        ("10.0.0.0/8", "", "evil.test", "10.0.0.1", True),  # allowed by the address connected
        ("10.0.0.0/8", "", "evil.test", "11.0.0.1", False),
        ("HOOKS.corp.test", "", "hooks.corp.test.", "10.0.0.1", True),  # case, root dot
        ("*.corp.test", "10.0.0.0/8", "db.corp.test", "10.0.0.1", False),  # deny wins
    ],
)
def test_allow_and_deny_rules(
    allow: str, deny: str, host: str, address: str, permitted: bool
) -> None:
    """Names, wildcards and CIDRs; with allow rules a destination must match one."""
    assert policy(allow, deny).permits(host, ip_address(address)) is permitted


@pytest.mark.parametrize(
    ("address", "carries_10_net"),
    [
        ("2002:a01:203::1", True),
        ("64:ff9b::a01:203", True),
        ("::10.1.2.3", True),
        ("2002:b01:203::1", False),
        ("64:ff9b::b01:203", False),
        ("::1", False),  # loopback, not 0.0.0.1
        ("64:ff9b:1::a01:203", True),
        ("64:ff9b:1:2:3:4:a01:203", True),
        ("64:ff9b:1::b01:203", False),
        ("64:ff9b:2::a01:203", False),  # outside the local-use /48: an address of its own
    ],
)
def test_a_rule_on_an_ipv4_address_covers_the_ipv6_addresses_that_carry_it(
    address: str, carries_10_net: bool
) -> None:
    """A rule on 10.0.0.0/8 applies to its 6to4, NAT64 (well-known and local-use prefixes) and
    IPv4-compatible forms, and only those."""
    assert policy(deny="10.0.0.0/8").permits("svc", ip_address(address)) is not carries_10_net
    assert policy(allow="10.0.0.0/8", deny="").permits("svc", ip_address(address)) is carries_10_net


def test_a_refusal_names_the_ipv4_address_an_ipv6_one_carries() -> None:
    """The error shows which IPv4 address the rule matched."""
    with pytest.raises(DestinationDenied, match=r"64:ff9b::a9fe:a9fe \(169\.254\.169\.254\) is"):
        policy().check_host("64:ff9b::a9fe:a9fe")


@pytest.mark.parametrize(
    "address", ["0.0.0.0", "0.1.2.3", "::", "::ffff:0.0.0.0", "2002::1", "64:ff9b::"]
)
def test_unspecified_addresses_are_refused_whatever_the_rules_say(address: str) -> None:
    """0.0.0.0/8 and ``::`` reach this host: refused even when every rule would allow them."""
    lenient = policy(allow="0.0.0.0/8,::/0,127.0.0.0/8,svc", deny="")
    assert not lenient.permits("svc", ip_address(address))
    with pytest.raises(DestinationDenied, match=r"unspecified .* always refused"):
        lenient.check_host(address)


def test_a_denied_name_is_refused_before_it_is_resolved() -> None:
    """A host name on the deny list fails without a DNS query."""
    with pytest.raises(DestinationDenied, match=r"host db\.corp\.test"):
        policy(deny="*.corp.test").check_host("DB.corp.test")


@pytest.mark.parametrize(
    ("value", "why"), [("10.0.0.0/33", "no CIDR"), ("a*b", "no host name"), ("x/8", "no host")]
)
def test_a_rule_that_means_nothing_stops_the_worker_at_start(
    monkeypatch: pytest.MonkeyPatch, value: str, why: str
) -> None:
    """A typo in CRON_HTTP_DENY is a start-up error naming the variable and the entry."""
    monkeypatch.setenv("CRON_HTTP_DENY", f"169.254.0.0/16,{value}")
    with pytest.raises(SettingsError, match=f"CRON_HTTP_DENY: .*{why}"):
        load_settings(WorkerSettings)


def test_rules_parse_every_kind_of_entry() -> None:
    """Host names, wildcards, addresses and CIDRs, IPv4 and IPv6."""
    rules = Rules.parse(["Hooks.Test", "*.corp.test", "10.0.0.0/8", "fd00::1", "127.0.0.2"])
    assert rules.names == {"hooks.test"} and rules.suffixes == (".corp.test",)
    assert [str(n) for n in rules.networks] == ["10.0.0.0/8", "fd00::1/128", "127.0.0.2/32"]


async def test_a_denied_literal_address_receives_nothing(http_handler: Handler) -> None:
    """Deny 127.0.0.2/32, call 127.0.0.2: refused before anything is sent."""
    with (
        serve(Endpoint(), host="127.0.0.2") as endpoint,
        pytest.raises(DestinationDenied, match=r"address 127\.0\.0\.2") as caught,
    ):
        await http_handler(http_deny="127.0.0.2/32")({"url": endpoint.url}, CTX)
    assert endpoint.requests == [] and caught.value.reason == "destination-denied"


@pytest.mark.parametrize("host", ["0.0.0.0", "[::]"])
async def test_the_unspecified_address_receives_nothing_though_it_reaches_this_host(
    http_handler: Handler, host: str
) -> None:
    """``http://0.0.0.0:port/`` connects to this host's own listeners: refused, nothing sent."""
    with serve(Endpoint()) as endpoint:
        port = int(endpoint.url.rpartition(":")[2])
        with socket.create_connection(("0.0.0.0", port), timeout=5):
            pass  # the way past a loopback rule is real: the kernel connects it to 127.0.0.1
        with pytest.raises(DestinationDenied, match="unspecified"):
            await http_handler(http_deny="127.0.0.0/8,::1")({"url": f"http://{host}:{port}/"}, CTX)
    assert endpoint.requests == []


class Answers(AbstractResolver):
    """A resolver that answers every name with the given addresses, asking no DNS server."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """One record per address, as the system's resolver gives them."""
        return [
            ResolveResult(hostname=host, host=a, port=port, family=family, proto=0, flags=0)
            for a in self.addresses
        ]

    async def close(self) -> None:
        """Nothing to close."""


@pytest.mark.parametrize(
    ("answers", "reasons"),
    [
        # A sinkhole's answer, and NAT64's form of 169.254.169.254.
        (
            ("0.0.0.0", "64:ff9b::a9fe:a9fe"),
            ["0.0.0.0 is unspecified", "(169.254.169.254) is refused by CRON_HTTP_DENY"],
        ),
        # Alibaba Cloud's metadata, and its form under NAT64's local-use prefix.
        (
            ("100.100.100.200", "64:ff9b:1::6464:64c8"),
            ["100.100.100.200 is refused", "64:ff9b:1::6464:64c8 (100.100.100.200) is refused"],
        ),
    ],
)
async def test_a_name_resolving_to_unspecified_or_metadata_addresses_is_refused(
    answers: tuple[str, ...], reasons: list[str]
) -> None:
    """Each refused address of the DNS answer is named with why it is refused."""
    resolver = PolicyResolver(policy(), Answers(*answers))
    with pytest.raises(DestinationDenied, match=r"meta\.test resolves only to") as caught:
        await resolver.resolve("meta.test", 80)
    assert all(reason in str(caught.value) for reason in reasons), str(caught.value)


async def test_permitted_addresses_of_a_name_are_kept_and_refused_ones_dropped() -> None:
    """Of a name's addresses, aiohttp is handed only those the policy permits."""
    resolver = PolicyResolver(policy(), Answers("169.254.169.254", "127.0.0.1", "::"))
    assert [r["host"] for r in await resolver.resolve("mixed.test", 80)] == ["127.0.0.1"]


async def test_a_name_resolving_to_a_denied_address_receives_nothing(http_handler: Handler) -> None:
    """Deny loopback, call ``localhost``: the address after DNS is refused."""
    with serve(Endpoint()) as endpoint:
        url = endpoint.url.replace("127.0.0.1", "localhost")
        with pytest.raises(DestinationDenied, match=r"localhost resolves only to .*127\.0\.0\.1"):
            await http_handler(http_deny="127.0.0.0/8,::1")({"url": url}, CTX)
    assert endpoint.requests == []


async def test_a_numeric_host_that_means_a_denied_address_receives_nothing(
    http_handler: Handler,
) -> None:
    """``http://2130706433/`` is 127.0.0.1 to the system's resolver: the policy refuses it as
    that address before anything is sent (tests/test_numeric_hosts.py: every spelling)."""
    with serve(Endpoint()) as endpoint:
        url = endpoint.url.replace("127.0.0.1", "2130706433")
        with pytest.raises(DestinationDenied, match=r"2130706433 means 127\.0\.0\.1"):
            await http_handler(http_deny="127.0.0.0/8,::1")({"url": url}, CTX)
    assert endpoint.requests == []


async def test_an_allowed_name_still_connects(http_handler: Handler) -> None:
    """With an allow list naming the host, the call goes through."""
    with serve(Endpoint()) as endpoint:
        url = endpoint.url.replace("127.0.0.1", "localhost")
        call = http_handler(http_allow="localhost", http_deny="::1")
        assert await call({"url": url}, CTX) == {"status": 200}
        with pytest.raises(DestinationDenied):
            await call({"url": endpoint.url}, CTX)
    assert len(endpoint.requests) == 1


@pytest.mark.parametrize(
    ("deny", "reachable"),
    [
        (None, []),
        ("10.0.0.0/8", ["169.254.169.254", "fd00:ec2::254", "100.100.100.200"]),
        ("169.254.0.0/16,fe80::/10,fd00:ec2::254", ["100.100.100.200"]),  # the older defaults
    ],
)
def test_a_deny_list_without_the_metadata_addresses_is_warned_about(
    deny: str | None, reachable: list[str]
) -> None:
    """Replacing CRON_HTTP_DENY without the defaults logs a warning naming every metadata
    address it leaves reachable."""
    with capture_logs() as logs:
        warn_if_metadata_reachable(policy(deny=deny))
    warnings = [e for e in logs if "cloud metadata" in e["event"]]
    assert [w["reachable"] for w in warnings] == ([reachable] if reachable else [])
