"""Which names on a broker are a namespace's: each kind of name warren makes, matched whole.

A prefix is not enough: namespaces may hold ``_`` and ``.``, so ``acc_key.`` (namespace
``acc``'s idempotency keys) starts every name of namespace ``acc_key.x``, and ``acc`` has run
locks ``acc_lock.<schedule>`` for any schedule name, ``acc_lock.y_scheduler`` too. So each
kind is matched by its whole shape (a digest by its length, a plan by its steps, a delay
level by its number; the shapes are those of ``topology/names.py``), and a name that is also
one of a longer namespace present on the broker (one of whose fixed exchanges, or two of
whose fixed queues, exist) is left to that namespace.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from warren_cron.names import DELAY_LEVELS, FINAL_KEY, Names

_STEP = r"\d+(?:ms|s|m|h)"
_PLAN = rf"(?:{FINAL_KEY}|{_STEP}(?:-{_STEP})*)"
_LEVEL = "|".join(str(level) for level in range(DELAY_LEVELS))
#: A schedule name (``topology/schedules/spec.py``); a lock's holder queue is one too.
_SCHEDULE = r"[A-Za-z0-9][A-Za-z0-9_.\-]*"
#: After ``<namespace>_``: the queues made per plan, per delay level and per key.
_QUEUE_SHAPES = re.compile(
    "|".join(
        (
            rf"scheduler_retry\.{_PLAN}",
            rf"delay\.(?:{_LEVEL})",
            rf"delay\.land\.{_PLAN}",
            r"key\.[0-9a-f]{40}",
            r"crash\.[0-9a-f]{32}",
            rf"lock\.{_SCHEDULE}",
            r"scheduler\.(?:leader|watermark)\.\d{1,3}",  # a partition's lock and watermark
            r"slot\.[0-9a-f]{16}\.\d{1,2}",
            r"rate\.[0-9a-f]{16}",
        )
    )
)
_EXCHANGE_SHAPES = re.compile(rf"delay\.(?:{_LEVEL}|deliver)")


def fixed_queues(names: Names) -> list[str]:
    """The queues and streams every namespace has the same names for."""
    return names.queues(())


def fixed_exchanges(names: Names) -> list[str]:
    """The exchanges every namespace has the same names for, delay levels included."""
    levels = [names.delay_level(level) for level in range(DELAY_LEVELS)]
    return [*names.exchanges, *levels, names.delay_deliver_exchange]


def is_queue_of(namespace: str, name: str) -> bool:
    """Whether queue (or stream) ``name`` has the shape of one warren makes in ``namespace``."""
    if name in fixed_queues(Names(namespace)):
        return True
    head = f"{namespace}_"
    return name.startswith(head) and _QUEUE_SHAPES.fullmatch(name[len(head) :]) is not None


def is_exchange_of(namespace: str, name: str) -> bool:
    """Whether exchange ``name`` has the shape of one warren makes in ``namespace``."""
    if name in Names(namespace).exchanges:
        return True
    head = f"{namespace}_"
    return name.startswith(head) and _EXCHANGE_SHAPES.fullmatch(name[len(head) :]) is not None


def present(queues: Iterable[str], exchanges: Iterable[str]) -> set[str]:
    """The namespaces on the broker: one of whose fixed exchanges, or two of whose fixed
    queues, are listed (one queue alone may be another namespace's run lock)."""
    pattern = Names("\0")  # every fixed name is the namespace followed by a suffix
    found: Counter[str] = Counter()
    for names, suffixes, weight in (
        (queues, [q[1:] for q in fixed_queues(pattern)], 1),
        (exchanges, [e[1:] for e in fixed_exchanges(pattern)], 2),
    ):
        for name in names:
            for suffix in suffixes:
                if name.endswith(suffix) and len(name) > len(suffix):
                    found[name[: -len(suffix)]] += weight
    return {namespace for namespace, weight in found.items() if weight >= 2}


def owned(
    namespace: str, queues: Iterable[str], exchanges: Iterable[str]
) -> tuple[list[str], list[str]]:
    """The queues and exchanges, of those listed, that are ``namespace``'s, sorted."""
    queues, exchanges = sorted(set(queues)), sorted(set(exchanges))
    longer = {ns for ns in present(queues, exchanges) if ns.startswith(f"{namespace}_")}

    def mine_queue(name: str) -> bool:
        return is_queue_of(namespace, name) and not any(is_queue_of(ns, name) for ns in longer)

    def mine_exchange(name: str) -> bool:
        theirs = any(is_exchange_of(ns, name) for ns in longer)
        return is_exchange_of(namespace, name) and not theirs

    return [q for q in queues if mine_queue(q)], [e for e in exchanges if mine_exchange(e)]
