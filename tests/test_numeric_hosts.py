"""Hosts that spell an IPv4 address the legacy ways: the destination policy decides them itself.

``inet_aton`` (and so the system's resolver, and aiohttp before 3.14.1, which connects to an
all-digit host without asking the resolver) reads ``2130706433``, ``0177.0.0.1``, ``0x7f.1``
and ``127.1`` as 127.0.0.1. The policy judges each as the address it spells and refuses it,
before any resolver is asked, whatever the HTTP client does with it.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp.abc import ResolveResult

from tests.conftest import plan
from tests.helpers import envelope, publish_all
from tests.namespace import TestBroker
from tests.test_destinations import Answers, policy
from warren_cron.errors import DestinationDenied, SettingsError
from warren_cron.faultkit.waits import eventually
from warren_cron.runtime.settings import load_settings
from warren_cron.worker.destinations import DEFAULT_DENY
from warren_cron.worker.resolver import PolicyResolver
from warren_cron.worker.settings import WorkerSettings

#: 127.0.0.1 as inet_aton reads it: decimal, octal, hex, short dotted, mixed, the root's dot.
LOOPBACK_FORMS = [
    "2130706433",
    "017700000001",
    "0177.0.0.1",
    "0x7f000001",
    "0X7F000001",
    "0x7f.1",
    "127.1",
    "127.0.1",
    "0x7f.0.0.1",
    "0177.0x0.1",
    "127.0.0.01",
    "127.000.000.001",
    "127.0.0.1.",
    "2130706433.",
]
#: 0.0.0.0, which reaches this host and is refused whatever the rules say.
UNSPECIFIED_FORMS = ["0", "00", "0x0", "0.0", "0.0.0", "0."]
#: 169.254.169.254 (cloud metadata, denied by default) and 100.100.100.200 (Alibaba Cloud's).
METADATA_FORMS = [
    "2852039166",
    "0xa9fea9fe",
    "0251.0376.0251.0376",
    "169.254.43518",
    "0xa9.0xfe.0xa9.0xfe",
    "2852039166.",
]
DENY_LOOPBACK = "127.0.0.0/8,::1"
#: How long the failed queue may stand still before a wait gives up: a loaded machine is slow,
#: not stuck, so the wait goes on while records keep arriving.
PATIENCE = 30.0


def test_these_forms_are_127_0_0_1_to_the_system() -> None:
    """The way past a rule on 127.0.0.0/8 is real: the C library reads every form as it."""
    read = {socket.inet_aton(form.removesuffix(".")) for form in LOOPBACK_FORMS}
    assert read == {bytes([127, 0, 0, 1])}


@pytest.mark.parametrize("host", LOOPBACK_FORMS)
def test_every_spelling_of_a_denied_address_is_refused_as_that_address(host: str) -> None:
    """With 127.0.0.0/8 denied, each form is refused, naming the address and the rule."""
    expected = rf"host {re.escape(host)} means 127\.0\.0\.1: .* refused by CRON_HTTP_DENY"
    with pytest.raises(DestinationDenied, match=expected):
        policy(deny=DENY_LOOPBACK).check_host(host)


@pytest.mark.parametrize("host", UNSPECIFIED_FORMS)
def test_every_spelling_of_0_0_0_0_is_refused_whatever_the_rules_say(host: str) -> None:
    """``http://0:port/`` reaches this host: refused even when every rule allows it."""
    lenient = policy(allow="0.0.0.0/8,127.0.0.0/8", deny="")
    with pytest.raises(DestinationDenied, match=r"means 0\.0\.0\.0: .*always refused"):
        lenient.check_host(host)


@pytest.mark.parametrize("host", METADATA_FORMS)
def test_every_spelling_of_the_metadata_address_is_refused_by_default(host: str) -> None:
    """``2852039166`` is 169.254.169.254: the default deny list refuses it."""
    with pytest.raises(DestinationDenied, match=r"means 169\.254\.169\.254: .*CRON_HTTP_DENY"):
        policy().check_host(host)
    with pytest.raises(DestinationDenied, match=r"means 100\.100\.100\.200"):
        policy().check_host("1684301000")


@pytest.mark.parametrize(("host", "address"), [("127.1", "127.0.0.1"), ("0xa000001", "10.0.0.1")])
def test_a_legacy_spelling_of_a_permitted_address_is_refused_with_the_fix(
    host: str, address: str
) -> None:
    """Clients read these forms differently, so even a permitted one is refused, saying what
    to write instead."""
    fix = rf"host {re.escape(host)} is a legacy spelling of {address}: write {address}"
    with pytest.raises(DestinationDenied, match=fix):
        policy().check_host(host)
    policy().check_host(address)


@pytest.mark.parametrize(
    "host", ["4294967296", "1.2.3.4.5", "08", "0x", "0x1.0x", "example.123", "127.0.0.1.."]
)
def test_a_host_ending_in_a_number_that_is_no_address_is_refused(host: str) -> None:
    """No name ends in a number: such a host is no destination, whatever a resolver says."""
    with pytest.raises(DestinationDenied, match="ends in a number but is no IPv4 address"):
        policy().check_host(host)


def test_a_colon_host_that_is_no_ipv6_address_is_refused() -> None:
    """aiohttp sends a host with a colon to the socket without asking the resolver."""
    with pytest.raises(DestinationDenied, match=r"host ::ffff:127\.1 is no IPv6 address"):
        policy().check_host("::ffff:127.1")


class Recording(Answers):
    """Answers every name with the given addresses and records the names it was asked."""

    def __init__(self, *addresses: str) -> None:
        super().__init__(*addresses)
        self.asked: list[str] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Record the name, then answer it."""
        self.asked.append(host)
        return await super().resolve(host, port, family)


@pytest.mark.parametrize("host", ["0x7f.1", "2130706433", "127.1"])
async def test_a_numeric_host_is_refused_before_any_resolver_is_asked(host: str) -> None:
    """The resolver cannot turn 127.0.0.1 spelled in hex into a permitted answer."""
    inner = Recording("10.9.9.9")
    with pytest.raises(DestinationDenied, match=r"means 127\.0\.0\.1"):
        await PolicyResolver(policy(deny=DENY_LOOPBACK), inner).resolve(host, 80)
    assert inner.asked == []


@pytest.mark.parametrize("entry", ["2130706433", "10/8", "127.0.0.1.", "0x7f.1/32"])
def test_a_rule_spelled_as_a_number_stops_the_worker_at_start(
    monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    """As a host name it would match nothing: a start-up error saying how to write it."""
    monkeypatch.setenv("CRON_HTTP_DENY", f"169.254.0.0/16,{entry}")
    with pytest.raises(SettingsError, match=r"CRON_HTTP_DENY: .*is no address: write it as a\.b"):
        load_settings(WorkerSettings)


@asynccontextmanager
async def hostile_server() -> AsyncIterator[tuple[int, list[object]]]:
    """A server on 127.0.0.1 that answers 200 to anything and records every connection."""
    reached: list[object] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reached.append(writer.get_extra_info("peername"))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1], reached


async def wait_outcomes(broker: TestBroker, count: int, reached: list[object]) -> list[Any]:
    """The failed queue's records once ``count`` tasks failed or reached the server; the wait
    gives up only when no task came to an end for ``PATIENCE`` seconds."""
    ended = 0
    while ended < count:

        async def grew(before: int = ended) -> int:
            now = await broker.depth(broker.names.failed_queue) + len(reached)
            return now if now > before else 0

        ended = await eventually(grew, PATIENCE, what=f"more than {ended} of {count} ended")
    return await broker.get_all(broker.names.failed_queue)


@pytest.mark.broker
async def test_no_spelling_reaches_a_denied_loopback_server_through_a_worker(
    broker: TestBroker, run_worker: Any
) -> None:
    """A worker denying 127.0.0.0/8 (and the defaults) gets an http task for each spelling of
    127.0.0.1 and 0.0.0.0: the server is never reached, and every task fails once as
    ``destination-denied`` naming its host and the address it means. (The metadata address's
    spellings are judged by the policy alone above: a worker that let one through would
    connect off this machine.)"""
    hosts = [*LOOPBACK_FORMS, *UNSPECIFIED_FORMS]
    async with hostile_server() as (port, reached):
        await run_worker(http_deny=",".join((*DEFAULT_DENY, DENY_LOOPBACK)))
        tasks = [envelope("http", {"url": f"http://{host}:{port}/hook"}) for host in hosts]
        await publish_all(broker, tasks, plan(50, 50))
        records = await wait_outcomes(broker, len(hosts), reached)
    assert reached == []
    errors = {r.headers["cron-error"] for r in records}
    assert {r.headers["cron-reason"] for r in records} == {"destination-denied"}, errors
    for host in hosts:
        meant = "127.0.0.1" if host in LOOPBACK_FORMS else "0.0.0.0"
        assert any(f"host {host.lower()} means {meant}:" in e for e in errors), (host, errors)
