"""Durations as written by people and in routing keys: ``500ms``, ``30s``, ``1h30m``, ``7d``.

One reader for every place a duration is typed (retry steps, intervals, ``--since`` ages) and
the two spellings written back: the exact one of a routing key, and a short one for people.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from datetime import datetime

#: Milliseconds per unit; "ms" comes first so that "500ms" is not read as minutes.
UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"(\d+)(ms|s|m|h|d)")
_KEY_UNITS = (("h", 3_600_000), ("m", 60_000), ("s", 1_000))
_PEOPLE_UNITS = (("d", 86_400), ("h", 3_600), ("m", 60))


def parse_ms(
    text: str, units: Collection[str] = tuple(UNIT_MS), compound: bool = True
) -> int | None:
    """Milliseconds of ``text``, made of ``<number><unit>`` parts in ``units``; else None.

    ``compound`` allows several parts (``1h30m``); without it one part is all there may be.
    """
    parts = _PART.findall(text)
    if not parts or "".join(n + unit for n, unit in parts) != text:
        return None
    if (len(parts) > 1 and not compound) or any(unit not in units for _, unit in parts):
        return None
    return sum(int(n) * UNIT_MS[unit] for n, unit in parts)


def key_spelling(ms: int) -> str:
    """The exact spelling in a routing key, in the largest unit that divides: 30000 -> ``30s``."""
    for unit, size in _KEY_UNITS:
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def for_people(seconds: float, parts: int | None = None) -> str:
    """``3.5s``, ``1m30s``, ``2h``, ``1d2h``; ``parts`` keeps only the largest units."""
    if seconds < 60:
        return f"{seconds:g}s"
    spelled = []
    rest = seconds
    for unit, size in _PEOPLE_UNITS:
        count, rest = divmod(rest, size)
        if count:
            spelled.append(f"{int(count)}{unit}")
    if rest:
        spelled.append(f"{round(rest, 3):g}s")
    return "".join(spelled[:parts])


def relative(moment: datetime | None, now: datetime) -> str:
    """``3m ago``, ``in 2h5m``; ``-`` for none."""
    if moment is None:
        return "-"
    seconds = (moment - now).total_seconds()
    spelled = for_people(int(abs(seconds)), parts=2)
    return f"in {spelled}" if seconds > 0 else f"{spelled} ago"
