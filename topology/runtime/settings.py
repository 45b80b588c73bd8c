"""Settings shared by every process, read from ``CRON_*`` environment variables.

Settings objects are built once at start (``load_settings``) and passed down; nothing reads
the environment at import time.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import AmqpDsn, Field, TypeAdapter, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from pydantic_settings import SettingsError as UnparsedSetting

from warren_cron.durations import parse_ms
from warren_cron.errors import Loc, SettingsError, validation_problems
from warren_cron.plan import MAX_DELAY_MS, RetryPlan

ENV_PREFIX = "CRON_"
_NAMESPACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")

S = TypeVar("S", bound=BaseSettings)
_AMQP_URL = TypeAdapter(AmqpDsn)
#: ``scheme://user:password@`` anywhere in a text; the password ends at ``@``, ``/`` or a space.
_URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@/\s]+@", re.IGNORECASE)


def redact_url(url: str) -> str:
    """Return ``url`` with its password replaced by ``***`` so it can be logged."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username}:***@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def redact_urls(text: str) -> str:
    """Return ``text`` with the password of every URL in it replaced by ``***``."""
    return _URL_PASSWORD.sub(r"\1***@", text)


def _amqp_url(url: str, place: int) -> str:
    """One node's URL, normalised; the error names its place in the list, never its text."""
    try:
        return str(_AMQP_URL.validate_python(url))
    except ValidationError:
        raise ValueError(
            f"URL {place} is not an amqp:// or amqps:// URL with a host "
            "(separate several nodes with commas)"
        ) from None


def split_list(value: object) -> object:
    """Accept a comma-separated string where a list of names is expected."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class CronSettings(BaseSettings):
    """Broker, topology, retry and logging settings common to every process."""

    model_config = SettingsConfigDict(
        # An empty variable (as .env.example writes unset ones) means "use the default".
        env_prefix=ENV_PREFIX,
        extra="ignore",
        frozen=True,
        env_ignore_empty=True,
    )

    namespace: str = Field("cron", description="Prefix of every queue and exchange name.")
    schedules_file: Path = Field(
        Path("schedules.toml"),
        description="TOML file of schedules (see examples/): the scheduler runs them; the "
        "monitor and warren failed read their retry plans.",
    )
    amqp_url: str = Field(
        "amqp://guest:guest@localhost:5672/",
        description="RabbitMQ URL (amqp:// or amqps://); for a cluster, the nodes' URLs "
        "separated by commas, tried in turn, a lost connection moving to the next.",
        repr=False,
    )
    queue_type: Literal["classic", "quorum"] = Field(
        "classic", description="Type of every durable queue: classic or quorum."
    )
    delivery_limit: int = Field(
        10,
        ge=1,
        le=1000,
        description="Quorum queues: runs of a task whose worker keeps dying before it is failed.",
    )
    max_retries: int = Field(3, ge=0, le=50, description="Retries after the first attempt.")
    retry_delay_ms: int = Field(
        30_000, ge=0, le=MAX_DELAY_MS, description="Delay before the first retry, in ms."
    )
    retry_delay_multiplier: float = Field(
        2.0, ge=1.0, le=100.0, description="Factor applied to the delay of each further retry."
    )
    retry_max_delay_ms: int | None = Field(
        None,
        ge=0,
        le=MAX_DELAY_MS,
        description="Cap on any single retry delay, in ms, and on the wait an http "
        "endpoint's Retry-After asks for (an hour when unset).",
    )
    history_max_age: str = Field(
        "7d",
        description="How long the history stream keeps events (e.g. 36h, 7d, 30d).",
    )
    history_max_bytes: int = Field(
        1_000_000_000,
        ge=1_000_000,
        description="Most bytes the history stream keeps; the oldest events go first.",
    )
    scheduler_partitions: int = Field(
        1,
        ge=1,
        le=256,
        description="Partitions the schedules are split into, each led by one scheduler: 1 "
        "(one leader runs them all) or 64 to spread a large set over several schedulers; the "
        "same on every scheduler, monitor and command of the namespace.",
    )
    heartbeat_seconds: int = Field(
        10, ge=1, le=600, description="AMQP heartbeat: how fast a dead connection is noticed."
    )
    metrics_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="Port of /metrics, /healthz and the probes /livez, /readyz and /startupz; "
        "0 serves none.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", description="Lowest level written to the log."
    )
    log_format: Literal["json", "console"] = Field(
        "json", description="json: one JSON object a line; console: coloured for people."
    )

    @field_validator("namespace")
    @classmethod
    def _check_namespace(cls, value: str) -> str:
        if not _NAMESPACE.fullmatch(value):
            raise ValueError("use letters, digits, '_', '.' or '-' (at most 100)")
        return value

    @field_validator("amqp_url")
    @classmethod
    def _check_urls(cls, value: str) -> str:
        urls = [url.strip() for url in value.split(",") if url.strip()]
        if not urls:
            raise ValueError("give a broker URL like amqp://user:password@host:5672/")
        return ",".join(_amqp_url(url, place) for place, url in enumerate(urls, 1))

    @field_validator("history_max_age")
    @classmethod
    def _check_age(cls, value: str) -> str:
        if (parse_ms(value, ("s", "m", "h", "d")) or 0) < 60_000:
            raise ValueError("give at least a minute, like 36h or 7d (units s, m, h, d)")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @property
    def urls(self) -> list[str]:
        """The broker nodes' URLs in the order they are tried, passwords included: never log."""
        return self.amqp_url.split(",")

    @property
    def safe_url(self) -> str:
        """Broker URL(s) with the passwords hidden, for logs and errors."""
        return ",".join(redact_url(url) for url in self.urls)

    @property
    def history_max_age_seconds(self) -> int:
        """``CRON_HISTORY_MAX_AGE`` in seconds."""
        return (parse_ms(self.history_max_age) or 0) // 1000

    def default_plan(self) -> RetryPlan:
        """Retry plan built from ``CRON_MAX_RETRIES`` and the delay settings."""
        return RetryPlan.exponential(
            self.max_retries,
            self.retry_delay_ms,
            self.retry_delay_multiplier,
            self.retry_max_delay_ms,
        )


def _refuse_empty_namespace() -> None:
    # Every other empty variable means its default (.env.example writes unset ones), but an
    # empty namespace silently meaning "cron" would run a deployment in another one's queues.
    if os.environ.get(f"{ENV_PREFIX}NAMESPACE", "unset").strip() == "":
        raise SettingsError(
            "invalid configuration:\n"
            f"  {ENV_PREFIX}NAMESPACE: is set but empty; give a name (letters, digits, '_', "
            "'.' or '-'), or unset it to use the default 'cron'\n"
            "fix the variables above (see .env.example) and start again"
        )


ModuleList = Annotated[list[str], NoDecode]


def describe_errors(cls: type[BaseSettings], error: ValidationError) -> str:
    """Turn a validation error into lines naming each ``CRON_*`` variable, never its value."""
    prefix = str(cls.model_config.get("env_prefix", ""))

    def variable(loc: Loc) -> str:
        return f"{prefix}{str(loc[0]).upper()}" if loc else ""

    lines = ["invalid configuration:"]
    lines += [f"  {problem}" for problem in validation_problems(error, where=variable)]
    lines.append("fix the variables above (see .env.example) and start again")
    return "\n".join(lines)


def load_settings(cls: type[S]) -> S:
    """Build ``cls`` from the environment, or raise ``SettingsError`` naming what is wrong."""
    _refuse_empty_namespace()
    try:
        return cls()
    except ValidationError as error:
        raise SettingsError(describe_errors(cls, error)) from None
    except UnparsedSetting as error:  # a list or table whose JSON does not parse
        raise SettingsError(_unparsed(cls, error)) from None


def _unparsed(cls: type[BaseSettings], error: UnparsedSetting) -> str:
    """Name the variable whose JSON does not parse, never its value (it may hold a secret)."""
    field = re.search(r'field "(\w+)"', str(error))
    prefix = str(cls.model_config.get("env_prefix", ""))
    variable = f"{prefix}{field.group(1).upper()}" if field else "a variable"
    return (
        "invalid configuration:\n"
        f"  {variable}: is not valid JSON; give its list or table as JSON, in the form "
        "docs/settings.md shows for it\n"
        "fix the variables above (see .env.example) and start again"
    )
