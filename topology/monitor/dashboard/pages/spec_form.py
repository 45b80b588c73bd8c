"""A runtime schedule as the dashboard's form holds it, and back: every field the store
accepts, as text inputs, choices, boxes and JSON.

A field left empty is unset (an edit sets it back to its default). What the form itself can
tell is wrong (a number that is none, a payload that is not JSON) is named here; everything
else is checked by the store as for any other writer (``topology/store/edits.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

#: Fields typed as text, in the form's order.
TEXT = (
    "name",
    "cron",
    "every",
    "timezone",
    "task",
    "start_at",
    "stop_at",
    "jitter",
    "expect_success_within",
)
NUMBERS: dict[str, Callable[[str], Any]] = {
    "runs": int,
    "timeout_seconds": float,
    "misfire_grace_seconds": float,
}
RETRY: dict[str, Callable[[str], Any]] = {
    "max_retries": int,
    "delay_ms": int,
    "multiplier": float,
    "max_delay_ms": int,
}
#: Each choice's options, its default first.
CHOICES = {"concurrency": ("Allow", "Forbid", "Replace"), "catch_up": ("latest", "skip", "all")}
FLAGS = {"enabled": True, "pause_on_failure": False}
#: A box's value when ticked; an unticked box sends nothing.
TICKED = "on"


def form_fields(form: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The spec's fields from ``form`` (None for each left empty) and what is wrong with
    them, each problem starting with its field's name."""
    problems: list[str] = []
    fields: dict[str, Any] = {key: _text(form, key) for key in TEXT}
    fields |= {key: _number(form, key, parse, problems) for key, parse in NUMBERS.items()}
    fields |= {key: _choice(form, key) for key in CHOICES}
    fields |= {key: form.get(key) == TICKED for key in FLAGS}
    fields["payload"] = _payload(form.get("payload", ""), problems)
    fields["exclude"] = form.get("exclude", "").replace(",", " ").split() or None
    retry = {key: _number(form, f"retry_{key}", parse, problems) for key, parse in RETRY.items()}
    fields["retry"] = {k: v for k, v in retry.items() if v is not None} or None
    return fields, problems


def form_values(spec: Mapping[str, Any] | None) -> dict[str, str]:
    """The form's inputs for a spec as shown (its credentials masked): each as text."""
    spec = spec or {}
    values = {key: _shown(spec.get(key)) for key in (*TEXT, *NUMBERS)}
    values |= {key: str(spec.get(key, choices[0])) for key, choices in CHOICES.items()}
    values |= {key: TICKED if spec.get(key, default) else "" for key, default in FLAGS.items()}
    payload = spec.get("payload")
    values["payload"] = (
        "" if payload is None else orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode()
    )
    values["exclude"] = "\n".join(str(day) for day in spec.get("exclude", ()))
    retry = spec.get("retry") or {}
    values |= {f"retry_{key}": _shown(retry.get(key)) for key in RETRY}
    return values


def created(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a new schedule: those given (unset ones take their defaults)."""
    return {key: value for key, value in fields.items() if value is not None}


def _text(form: Mapping[str, str], key: str) -> str | None:
    return form.get(key, "").strip() or None


def _shown(value: Any) -> str:
    return "" if value is None else str(value)


def _number(
    form: Mapping[str, str], key: str, parse: Callable[[str], Any], problems: list[str]
) -> Any:
    text = form.get(key, "").strip()
    if not text:
        return None
    try:
        return parse(text)
    except ValueError:
        kind = "a whole number" if parse is int else "a number"
        problems.append(f"{key.replace('retry_', 'retry.')}: give {kind}, not {text[:40]!r}")
        return None


def _choice(form: Mapping[str, str], key: str) -> str | None:
    return form.get(key) or None


def _payload(text: str, problems: list[str]) -> Any:
    if not text.strip():
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as error:
        problems.append(
            f'payload: not JSON ({error}); give a JSON value, e.g. {{"url": "https://..."}}'
        )
        return None
