"""Secrets written into a runtime schedule, masked whenever the schedule is read.

A webhook's payload may hold a credential as it is: the value of a sensitive header
(``Authorization``, ``X-Api-Key``, any name with ``token``, ``secret`` or ``password``,
the rules of ``topology/redaction.py``), a URL's password, a URL query value of a sensitive
name (``?api_key=``, ``?sig=``). ``warren schedules get``, the API's GET and the dashboard
show each as ``MASK``. A reference (``{"env": "NAME"}``, ``{"file": "/path"}``) names where
the secret lives, not the secret, and is shown as it is.

The round trip: an update may send back what a read showed. A header whose value is
``MASK``, or a URL that is exactly the stored URL as masked, keeps the stored value. A
``MASK`` anywhere else (a header that holds no stored secret, a URL that differs from the
stored one, any create) is refused: it would store the placeholder as the credential.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from warren_cron.errors import InvalidSchedule
from warren_cron.redaction import REDACTED, sensitive_header, sensitive_param
from warren_cron.schedules.spec import ScheduleSpec
from warren_cron.store.changes import spec_json

MASK = REDACTED


def shown_spec(spec: ScheduleSpec) -> dict[str, Any]:
    """The spec as JSON fit to show: its payload's credentials masked."""
    fields = spec_json(spec)
    if "payload" in fields:
        fields["payload"] = masked_payload(fields["payload"])
    return fields


def masked_payload(payload: Any) -> Any:
    """A payload with each literal credential of its headers and URL replaced by ``MASK``."""
    if not isinstance(payload, Mapping):
        return payload
    shown = dict(payload)
    if isinstance(payload.get("headers"), Mapping):
        shown["headers"] = {
            name: MASK if isinstance(value, str) and sensitive_header(name) else value
            for name, value in payload["headers"].items()
        }
    if isinstance(payload.get("url"), str):
        shown["url"] = masked_url(payload["url"])
    return shown


def masked_url(url: str) -> str:
    """``url`` with its password and the values of sensitive query parameters masked."""
    parts = urlsplit(url)
    netloc = parts.netloc
    user, at, host = netloc.rpartition("@")
    if at and ":" in user:
        netloc = f"{user.partition(':')[0]}:{MASK}@{host}"
    query = "&".join(_masked_pair(pair) for pair in parts.query.split("&")) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _masked_pair(pair: str) -> str:
    name, equals, value = pair.partition("=")
    return f"{name}={MASK}" if equals and value and sensitive_param(name) else pair


def kept_secrets(stored: ScheduleSpec, changes: Mapping[str, Any]) -> dict[str, Any]:
    """``changes`` with each ``MASK`` sent back replaced by the stored secret it stands for;
    ``InvalidSchedule`` for a ``MASK`` that stands for none."""
    changed = dict(changes)
    payload = changes.get("payload")
    if isinstance(payload, Mapping):
        changed["payload"] = _unmasked(stored.name, payload, stored.payload)
    return changed


def refuse_masks(name: str, payload: Any) -> None:
    """``InvalidSchedule`` when a new schedule's payload holds ``MASK`` as a credential."""
    _unmasked(name, payload, None)


def _unmasked(name: str, payload: Any, stored: Any) -> Any:
    if not isinstance(payload, Mapping):
        return payload
    old = stored if isinstance(stored, Mapping) else {}
    given = dict(payload)
    problems: list[str] = []
    if isinstance(payload.get("headers"), Mapping):
        given["headers"] = _headers(payload["headers"], old.get("headers"), problems)
    if isinstance(payload.get("url"), str) and MASK in payload["url"]:
        given["url"] = _url(payload["url"], old.get("url"), problems)
    if problems:
        raise InvalidSchedule(name, problems)
    return given


def _headers(headers: Mapping[str, Any], stored: Any, problems: list[str]) -> dict[str, Any]:
    old = {str(k).lower(): v for k, v in stored.items()} if isinstance(stored, Mapping) else {}
    kept: dict[str, Any] = {}
    for header, value in headers.items():
        secret = old.get(str(header).lower())
        if value != MASK:
            kept[header] = value
        elif isinstance(secret, str) and sensitive_header(str(header)):
            kept[header] = secret
        else:
            problems.append(
                f"payload.headers.{header}: {MASK!r} is the mask a read shows for a stored "
                "secret, and this schedule holds none there: send the value itself, or "
                '{"env": "NAME"} / {"file": "/path"}'
            )
    return kept


def _url(url: str, stored: Any, problems: list[str]) -> str:
    if isinstance(stored, str) and masked_url(stored) == url:
        return stored
    problems.append(
        f"payload.url: holds {MASK!r}, the mask a read shows for a stored credential, but it "
        "is not the stored URL as shown: send the whole URL with its credentials (a literal "
        "'*' as %2A), or the URL exactly as read"
    )
    return url
