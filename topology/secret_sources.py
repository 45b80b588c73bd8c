"""Secrets by reference: what ``{ env = "NAME" }`` and ``{ file = "/path" }`` resolve to.

A reference comes from whoever can publish a task, so it may name only what the operator
opened to tasks: environment variables listed in ``CRON_HTTP_SECRET_ENV`` and files under
``CRON_HTTP_SECRET_DIR``. Otherwise a publisher could send the worker's own credentials (the
broker URL, a cloud key) to a URL of its choosing. Secrets are read on every attempt, so a
rotated file takes effect without a restart. The monitor reads its API tokens and its alert
targets' keys the same way, from the variables and files its operator names.

A reference has one spelling everywhere: the object ``{"env": "NAME"}`` or
``{"file": "/path"}`` (``{ env = "NAME" }`` in TOML). Settings that hold one reference alone
(``CRON_ALERT_*_KEY``, ``CRON_ALERT_EVENTS_SECRET``) also take the older ``env:NAME`` and
``file:/path`` strings, for the deployments that set them so (``reference_input``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import orjson

from warren_cron.errors import SecretUnavailable
from warren_cron.webhook import SecretRef

#: A secret larger than this is no header value: refuse rather than read a huge file.
MAX_SECRET_BYTES = 65_536
_SENDABLE = re.compile(r"[\t\x20-\x7e]+")
#: The older spelling of a setting's reference: ``env:NAME`` or ``file:/path``.
_PREFIXED = re.compile(r"(env|file):(.+)", re.DOTALL)


def reference_input(value: Any) -> Any:
    """A setting's reference as ``SecretRef`` validates it: the JSON object text
    ``{"env": "NAME"}`` as the object, ``env:NAME`` / ``file:/path`` as the object they mean;
    anything else as it is (validation then says what a reference is, never echoing it)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("{"):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            raise ValueError(
                'not a JSON object: give {"env": "NAME"} or {"file": "/path"}'
            ) from None
    prefixed = _PREFIXED.fullmatch(text)
    if prefixed is None:
        # The value itself is not shown: it may be a secret pasted in place of a reference.
        raise ValueError('give a reference, {"env": "NAME"} or {"file": "/path"}, not a secret')
    return {prefixed.group(1): prefixed.group(2)}


def _unfit(value: str) -> str | None:
    """Why ``value`` cannot be sent as a header value, or None when it can (never the value)."""
    if not value:
        return "is empty"
    if "\r" in value or "\n" in value:
        return "holds a line break; a header value is one line"
    # Matched whole: ``$`` would also match before a final newline.
    return None if _SENDABLE.fullmatch(value) else "is not printable ASCII"


class SecretSources:
    """Resolves references against the variables and directory the operator opened."""

    def __init__(
        self,
        directory: Path,
        env_names: Sequence[str],
        environ: Mapping[str, str] = os.environ,
    ) -> None:
        self._directory = directory.resolve()
        self._env_names = tuple(env_names)
        self._environ = environ

    def resolve(self, ref: SecretRef, use: str) -> str:
        """The secret ``ref`` names for ``use`` (``header 'X-Token'``), or ``SecretUnavailable``
        saying why not."""
        try:
            value = self._from_env(ref.env) if ref.env is not None else self._from_file(ref.file)
        except SecretUnavailable as error:
            raise SecretUnavailable(f"{use}: {error}") from None
        if (problem := _unfit(value)) is not None:
            raise SecretUnavailable(f"{use}: secret {ref} {problem}")
        return value

    def _from_env(self, name: str) -> str:
        if not any(fnmatchcase(name, pattern) for pattern in self._env_names):
            raise SecretUnavailable(
                f"secret env {name}: not among CRON_HTTP_SECRET_ENV; list it there to use it"
            )
        if name not in self._environ:
            raise SecretUnavailable(f"secret env {name}: not set in this process's environment")
        return self._environ[name]

    def _from_file(self, name: str | None) -> str:
        path = Path(str(name)).resolve()
        if not path.is_relative_to(self._directory):
            raise SecretUnavailable(
                f"secret file {name}: outside CRON_HTTP_SECRET_DIR ({self._directory})"
            )
        try:
            with path.open("rb") as file:
                data = file.read(MAX_SECRET_BYTES + 1)
        except OSError as error:
            raise SecretUnavailable(f"secret file {name}: {error.strerror}") from None
        if len(data) > MAX_SECRET_BYTES:
            raise SecretUnavailable(f"secret file {name}: larger than {MAX_SECRET_BYTES} bytes")
        # Files written by editors and `echo` end with a newline that is no part of the
        # secret: one is dropped, as Docker and Kubernetes users expect; any other is refused.
        return _one_line_end_dropped(data.decode("ascii", "replace"))


def _one_line_end_dropped(text: str) -> str:
    return text[:-1].removesuffix("\r") if text.endswith("\n") else text
