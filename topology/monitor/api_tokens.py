"""Who may call the HTTP API: bearer tokens, each with a name and a role.

``CRON_API_TOKENS`` lists them as JSON. A token's secret is never written in the setting:
it is given by reference, ``{"env": "NAME"}`` or ``{"file": "/run/secrets/name"}``, as the
http task's secrets are, or as the SHA-256 of the token (``sha256``). The monitor keeps only
digests; a token sent is hashed and compared with every digest in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from warren_cron.errors import SecretUnavailable
from warren_cron.monitor.roles import Role, includes
from warren_cron.secret_sources import SecretSources
from warren_cron.webhook import SecretRef

#: A shorter secret can be guessed: ``openssl rand -hex 32`` gives 64 characters.
MIN_SECRET = 24
#: The operator names the token's secret: any variable of the monitor, any file.
_SOURCES = SecretSources(Path("/"), ["*"])


class ApiToken(BaseModel):
    """One token of ``CRON_API_TOKENS``: its name (history's ``by``), role and secret."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}\z")
    role: Role
    secret: SecretRef | None = None
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}\z")

    @model_validator(mode="after")
    def _one_secret(self) -> ApiToken:
        if (self.secret is None) == (self.sha256 is None):
            raise ValueError(
                f'token {self.name!r}: give "secret": {{"env": "NAME"}} or {{"file": "/path"}}, '
                'or "sha256": the hex SHA-256 of the token'
            )
        return self


@dataclass(frozen=True, slots=True)
class Caller:
    """Who sent a request: the token's name and role."""

    name: str
    role: Role

    def may(self, role: Role) -> bool:
        """Whether this caller's role includes ``role``."""
        return includes(self.role, role)


def digest(token: str) -> bytes:
    """The SHA-256 of a token, as kept and compared."""
    return hashlib.sha256(token.encode()).digest()


class TokenTable:
    """The configured tokens as digests; ``match`` finds the caller a token belongs to."""

    def __init__(self, tokens: Sequence[ApiToken]) -> None:
        """Read each token's secret; ValueError naming the token that cannot be used."""
        names = [token.name for token in tokens]
        if twice := sorted({name for name in names if names.count(name) > 1}):
            raise ValueError(f"token names are history's 'by': give each its own ({twice})")
        self._digests = [(_digest_of(token), Caller(token.name, token.role)) for token in tokens]

    def __bool__(self) -> bool:
        return bool(self._digests)

    def match(self, given: str) -> Caller | None:
        """The caller whose token is ``given``; every digest is compared, found or not."""
        sent, found = digest(given), None
        for kept, caller in self._digests:
            if hmac.compare_digest(sent, kept):
                found = caller
        return found


def _digest_of(token: ApiToken) -> bytes:
    if token.sha256 is not None:
        return bytes.fromhex(token.sha256)
    assert token.secret is not None
    try:
        secret = _SOURCES.resolve(token.secret, f"token {token.name!r}")
    except SecretUnavailable as error:
        raise ValueError(str(error)) from None
    if len(secret) < MIN_SECRET:
        raise ValueError(
            f"token {token.name!r}: its secret ({token.secret}) is shorter "
            f"than {MIN_SECRET} characters; make one with `openssl rand -hex 32`"
        )
    return digest(secret)
