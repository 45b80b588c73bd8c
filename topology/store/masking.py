"""Secrets written into a runtime schedule, masked whenever the schedule is read.

A webhook's payload may hold a credential as it is: the value of a sensitive header
(``Authorization``, ``X-Api-Key``, any name with ``token``, ``secret`` or ``password``,
the rules of ``topology/redaction.py``), a URL's password, a URL query value of a sensitive
name (``?api_key=``, ``?sig=``). ``warren schedules get``, the API's GET and the dashboard
show each as ``MASK``. A reference (``{"env": "NAME"}``, ``{"file": "/path"}``) names where
the secret lives, not the secret, and is shown as it is.

The round trip: an update (the API, the command, the dashboard's form, ``apply``) may send
back what a read showed. A ``MASK`` where the stored payload holds a secret keeps that
secret, but only while the URL still goes where it went (scheme, host and port): a secret
was given for one destination, and another host must not inherit it. A ``MASK`` anywhere
else (a header that holds no stored secret, a URL moved to another destination, any create)
is refused: it would store the placeholder as the credential, or send the credential away.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from warren_cron.errors import InvalidSchedule
from warren_cron.redaction import (
    REDACTED,
    masked_pair,
    masked_url,
    redact_payload,
    sensitive_header,
)
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.changes import spec_json

MASK = REDACTED
#: The port a URL of each scheme goes to when it names none.
_PORTS = {"http": 80, "https": 443}
Destination = tuple[str, str, int | None]
_RESEND = 'send the value itself, or {"env": "NAME"} / {"file": "/path"}'


def shown_spec(spec: ScheduleSpec) -> dict[str, Any]:
    """The spec as JSON fit to show: its payload's credentials masked."""
    fields = spec_json(spec)
    if "payload" in fields:
        fields["payload"] = masked_payload(fields["payload"])
    return fields


def masked_payload(payload: Any) -> Any:
    """A payload with each literal credential of its headers and URL replaced by ``MASK``."""
    # One rule for every view: the failure records and pages show payloads the same way.
    return redact_payload(payload)


def kept_secrets(stored: ScheduleSpec, changes: Mapping[str, Any]) -> dict[str, Any]:
    """``changes`` with each ``MASK`` sent back replaced by the stored secret it stands for;
    ``InvalidSchedule`` for a ``MASK`` that stands for none or whose URL moved elsewhere."""
    changed = dict(changes)
    payload = changes.get("payload")
    if isinstance(payload, Mapping):
        changed["payload"] = unmasked(stored.name, payload, stored.payload)
    return changed


def kept_spec(spec: ScheduleSpec, stored: ScheduleSpec | None) -> ScheduleSpec:
    """A whole new ``spec`` (an apply's) with its masks kept as ``kept_secrets`` keeps them;
    ``stored`` None: a create, where every mask is refused."""
    payload = unmasked(spec.name, spec.payload, None if stored is None else stored.payload)
    return spec if payload == spec.payload else spec.model_copy(update={"payload": payload})


def refuse_masks(name: str, payload: Any) -> None:
    """``InvalidSchedule`` when a new schedule's payload holds ``MASK`` as a credential."""
    unmasked(name, payload, None)


def unmasked(name: str, payload: Any, stored: Any) -> Any:
    """``payload`` with each ``MASK`` replaced by the secret ``stored`` holds in its place,
    while both go to one destination; ``InvalidSchedule`` naming every other ``MASK``."""
    if not isinstance(payload, Mapping):
        return payload
    old = stored if isinstance(stored, Mapping) else {}
    moved = _moved(payload.get("url"), old.get("url"))
    if moved is not None:
        old = {}  # nothing stored may follow the URL to its new destination
    given = dict(payload)
    problems: list[str] = []
    if isinstance(payload.get("headers"), Mapping):
        given["headers"] = _headers(payload["headers"], old.get("headers"), moved, problems)
    if isinstance(payload.get("url"), str) and MASK in payload["url"]:
        given["url"] = _url(payload["url"], old.get("url"), moved, problems)
    if problems:
        raise InvalidSchedule(name, problems)
    return given


def destination(url: Any) -> Destination | None:
    """Where a request to ``url`` goes: scheme, host and port; None for no URL."""
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    return scheme, parts.hostname or "", port or _PORTS.get(scheme)


def _moved(url: Any, stored: Any) -> str | None:
    """How the destination changed (``old -> new``), or None when it did not (or nothing
    was stored, as in a create)."""
    if not isinstance(stored, str):
        return None
    old, new = destination(stored), destination(url)
    if old is not None and old == new:
        return None
    return f"the URL went to {_shown(old)} and now goes to {_shown(new)}"


def _shown(place: Destination | None) -> str:
    return "no URL" if place is None else f"{place[0]}://{place[1]}:{place[2]}"


def _headers(
    headers: Mapping[str, Any], stored: Any, moved: str | None, problems: list[str]
) -> dict[str, Any]:
    old = {str(k).lower(): v for k, v in stored.items()} if isinstance(stored, Mapping) else {}
    kept: dict[str, Any] = {}
    for header, value in headers.items():
        secret = old.get(str(header).lower())
        if value != MASK:
            kept[header] = value
        elif isinstance(secret, str) and sensitive_header(str(header)):
            kept[header] = secret
        elif moved is not None:
            problems.append(
                f"payload.headers.{header}: {MASK!r} stands for the secret stored for the old "
                f"destination, and {moved}; another host must not inherit it: {_RESEND}"
            )
        else:
            problems.append(
                f"payload.headers.{header}: {MASK!r} is the mask a read shows for a stored "
                f"secret, and this schedule holds none there: {_RESEND}"
            )
    return kept


def _url(url: str, stored: Any, moved: str | None, problems: list[str]) -> str:
    if moved is not None:
        problems.append(
            f"payload.url: holds {MASK!r} for a stored credential, and {moved}; another host "
            "must not inherit it: send the URL with its credentials again"
        )
        return url
    kept = _kept_url(url, stored) if isinstance(stored, str) else url
    if MASK in kept:
        problems.append(
            f"payload.url: holds {MASK!r}, the mask a read shows for a stored credential, "
            "where this schedule holds none (a password, or a sensitive query value of that "
            "name): send the URL with its credentials (a literal '*' as %2A)"
        )
    return kept


def _kept_url(url: str, stored: str) -> str:
    """``url`` with a masked password and masked query values taken from ``stored``."""
    if masked_url(stored) == url:
        return stored
    new, old = urlsplit(url), urlsplit(stored)
    user, at, host = new.netloc.rpartition("@")
    netloc = new.netloc
    name, _, password = user.partition(":")
    old_user = old.netloc.rpartition("@")[0]
    if at and password == MASK and ":" in old_user:
        netloc = f"{name}:{old_user.partition(':')[2]}@{host}"
    query = "&".join(_kept_pairs(new.query, old.query)) if new.query else ""
    return urlunsplit((new.scheme, netloc, new.path, query, new.fragment))


def _kept_pairs(query: str, stored: str) -> list[str]:
    """Each pair of ``query`` that is, as shown, the stored pair of its name at its place
    among that name's pairs: the stored pair."""
    pairs: dict[str, list[str]] = {}
    for pair in stored.split("&"):
        pairs.setdefault(pair.partition("=")[0], []).append(pair)
    kept = []
    for pair in query.split("&"):
        same_name = pairs.get(pair.partition("=")[0], [])
        old = same_name.pop(0) if same_name else None
        kept.append(old if old is not None and masked_pair(old) == pair != old else pair)
    return kept
