"""Turn domain data into what a page shows: times, pages of rows, the chart's bars."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import orjson

from warren_cron.durations import for_people, relative
from warren_cron.headers import jsonable
from warren_cron.redaction import redact_headers, redact_task

T = TypeVar("T")
#: Rows on one page of a long table.
PAGE_SIZE = 50
#: Chart: minutes shown, and the height of the tallest bar in pixels.
CHART_MINUTES = 180
CHART_HEIGHT = 100
#: Colours' names of the chart's series, bottom to top; the stylesheet colours each.
SERIES = ("succeeded", "retrying", "failed", "other")


def stamp(moment: datetime | None) -> str:
    """A UTC time to the second, ``2026-01-31 02:30:00Z``; ``-`` for none."""
    return "-" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def ago(moment: datetime | None, now: datetime) -> str:
    """``3m ago`` or ``in 2h5m``; ``-`` for none."""
    return relative(moment, now)


def age(seconds: float | None) -> str:
    """``45s``, ``12m3s``; ``-`` when unknown."""
    return "-" if seconds is None else for_people(int(seconds), parts=2)


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of rows: its rows, its number (from 1), how many pages and rows in all."""

    rows: Sequence[T]
    number: int
    pages: int
    total: int


def page_of(rows: Sequence[T], number: str | None, size: int = PAGE_SIZE) -> Page[T]:
    """Page ``number`` (a query value; bad or out of range: the nearest page) of ``rows``."""
    pages = max(1, -(-len(rows) // size))
    try:
        wanted = int(number or 1)
    except ValueError:
        wanted = 1
    chosen = min(max(wanted, 1), pages)
    start = (chosen - 1) * size
    return Page(rows[start : start + size], chosen, pages, len(rows))


@dataclass(frozen=True, slots=True)
class Bar:
    """One minute of the chart: its position, and each series' rectangle (y, height)."""

    x: int
    label: str
    total: int
    parts: tuple[tuple[str, int, int], ...]


def chart(minutes: Sequence[tuple[int, Counter[str]]], width: int = 4) -> list[Bar]:
    """Stacked bars, one per minute, scaled so the busiest minute is ``CHART_HEIGHT`` tall."""
    peak = max((sum(c.values()) for _, c in minutes), default=0) or 1
    bars = []
    for index, (minute, counts) in enumerate(minutes):
        top, parts = CHART_HEIGHT, []
        for series in SERIES:
            height = round(counts.get(series, 0) * CHART_HEIGHT / peak)
            if height:
                top -= height
                parts.append((series, top, height))
        label = datetime.fromtimestamp(minute * 60, UTC).strftime("%H:%M")
        total = sum(counts.values())
        bars.append(Bar(index * width, label, total, tuple(parts)))
    return bars


def totals(minutes: Sequence[tuple[int, Counter[str]]]) -> list[tuple[str, int]]:
    """Attempts of the charted minutes per series, for the legend."""
    total: Counter[str] = Counter()
    for _, counts in minutes:
        total.update(counts)
    return [(series, total.get(series, 0)) for series in SERIES]


def pretty(value: Any) -> str:
    """Indented JSON of any JSON-ready value."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()


def shown_body(body: bytes) -> str:
    """A task body fit to show: a task's payload with its credentials hidden, or the text."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode(errors="replace")
    return pretty(redact_task(data))


def shown_headers(headers: dict[str, Any]) -> str:
    """Message headers fit to show: a credential-carrying one hidden."""
    shown = jsonable(dict(headers))
    return pretty(redact_headers(shown) if isinstance(shown, dict) else shown)
